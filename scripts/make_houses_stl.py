"""Write configs/meshes/houses.stl: a row of four simple houses with pitched roofs.

Usage: python3 scripts/make_houses_stl.py [--out PATH]

The mesh of configs/dambreak_houses.toml, drawn as a CAD tool would hand it over: millimetres,
the row along x and centred on the origin, standing on z = 0 (the case scales it by 0.001,
turns it 90 degrees about z so that the row runs across the tank, and moves it into place).
Each house is one closed prism: the gable's five corners (walls 80 mm high, the ridge 40 mm
above them, 80 mm wide) extruded 100 mm along the ridge. Binary STL, 16 triangles a house.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import trimesh

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "configs" / "meshes" / "houses.stl"

WIDTH = 80.0
"""Across the ridge (mm)."""
LENGTH = 100.0
"""Along the ridge (mm)."""
WALL = 80.0
"""Height of the eaves (mm)."""
RIDGE = 40.0
"""Height of the ridge above the eaves (mm)."""
CENTRES = (-225.0, -75.0, 75.0, 225.0)
"""x of each house's centre (mm): 150 mm apart, 70 mm streets between them."""


def house(x: float) -> trimesh.Trimesh:
    """One house centred at (x, 0) on z = 0: the gable (in x, z) extruded along y."""
    gable = [(-WIDTH / 2, 0.0), (WIDTH / 2, 0.0), (WIDTH / 2, WALL), (0.0, WALL + RIDGE),
             (-WIDTH / 2, WALL)]  # fmt: skip
    front = [(x + gx, -LENGTH / 2, gz) for gx, gz in gable]
    back = [(x + gx, LENGTH / 2, gz) for gx, gz in gable]
    vertices = np.array(front + back)
    faces = [[0, 2, 1], [0, 3, 2], [0, 4, 3]]  # front gable, a fan from corner 0
    faces += [[5, 6, 7], [5, 7, 8], [5, 8, 9]]  # back gable
    for k in range(5):  # walls and roof: quads between the gables
        n = (k + 1) % 5
        faces += [[k, n, 5 + n], [k, 5 + n, 5 + k]]
    mesh = trimesh.Trimesh(vertices=vertices, faces=np.array(faces), process=True)
    if mesh.volume < 0:  # wound inwards: turn every triangle over
        mesh.invert()
    return mesh


def main(argv: list[str] | None = None) -> int:
    """Write the STL and say what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT})")
    args = parser.parse_args(argv)
    row = trimesh.util.concatenate([house(x) for x in CENTRES])
    if not (row.is_watertight and row.is_volume):
        raise SystemExit("make_houses_stl: the row is not a closed solid; fix the drawing")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(row.export(file_type="stl"))
    print(
        f"wrote {args.out}: {len(CENTRES)} houses, {len(row.faces)} triangles, "
        f"{args.out.stat().st_size} bytes, volume {row.volume / 1e9:.6f} m^3 (in mm^3: "
        f"{row.volume:.0f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
