"""Surface meshes from files: read (STL, OBJ, PLY, OFF), placed by scale, rotate, translate.

The file is read with trimesh (https://trimesh.org), which needs nothing but numpy and reads
every format CAD and GIS tools export: binary and ASCII STL (DualSPHysics' GenCase builds cases
from STL), OBJ and PLY (SPlisHSPlasH and SPH_Taichi load those), OFF. numpy-stl was the other
candidate; it reads and writes STL only, with no OBJ or PLY and no check that a surface is
closed, which trimesh's edge count gives. Everything after reading (the inside test, distances,
particle placement) is this package's own numpy code, so trimesh's optional extras (rtree,
embree, scipy) are not needed.

A mesh is placed as GenCase places a drawn STL (`<drawscale>`, `<drawrotate>`, `<drawmove>`):
x' = R (S x) + t, S = diag(scale), R = Rz Ry Rx (rotations about the fixed axes x, then y, then
z, in degrees), t = translate.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["MESH_FORMATS", "MeshError", "Surface", "load_surface", "placement_matrix"]

MESH_FORMATS = ("stl", "obj", "ply", "off")
"""File name extensions read as meshes."""

AREA_TOLERANCE = 1e-12
"""Triangles with an area below this times the mesh's squared size are dropped as degenerate."""


class MeshError(Exception):
    """A mesh file cannot be used; the message says why (the caller names the file and key)."""


@dataclass(frozen=True, eq=False)
class Surface:
    """A triangle surface in the case's coordinates (metres), after scale, rotate, translate."""

    triangles: np.ndarray
    """(T, 3, 3) float64: the corners of each triangle; no degenerate triangle."""
    closed: bool
    """Whether every edge is shared by exactly two triangles (a watertight surface)."""
    open_edges: int
    """Edges that belong to one triangle only (0 when closed)."""

    @property
    def lower(self) -> np.ndarray:
        """(3,) lower corner of the bounding box."""
        return self.triangles.reshape(-1, 3).min(axis=0)

    @property
    def upper(self) -> np.ndarray:
        """(3,) upper corner of the bounding box."""
        return self.triangles.reshape(-1, 3).max(axis=0)

    @property
    def volume(self) -> float:
        """The enclosed volume (divergence theorem; meaningful for a closed surface) [m^3]."""
        a, b, c = self.triangles[:, 0], self.triangles[:, 1], self.triangles[:, 2]
        return abs(float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0)


def placement_matrix(
    scale: tuple[float, float, float], rotate: tuple[float, float, float]
) -> np.ndarray:
    """The 3 x 3 matrix R S: scale per axis, then rotate about x, y, z (degrees) in turn."""
    rx, ry, rz = (math.radians(r) for r in rotate)
    cx, sx, cy, sy, cz, sz = (math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry),
                              math.cos(rz), math.sin(rz))  # fmt: skip
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, cx, -sx], [0.0, sx, cx]])
    Ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    Rz = np.array([[cz, -sz, 0.0], [sz, cz, 0.0], [0.0, 0.0, 1.0]])
    R = Rz @ Ry @ Rx
    for a in range(3):  # exact zeros and ones for right angles, so axis-aligned faces stay so
        for b in range(3):
            r = round(R[a, b])
            if abs(R[a, b] - r) < 1e-15:
                R[a, b] = float(r)
    return R @ np.diag(np.asarray(scale, dtype=np.float64))


def load_surface(
    path: Path,
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0),
    rotate: tuple[float, float, float] = (0.0, 0.0, 0.0),
    translate: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> Surface:
    """Read a mesh file and place it; MeshError says what is wrong with the file.

    Raises MeshError when the file is missing, is no mesh file trimesh can read, or holds no
    triangle of non-zero area once placed. Whether it must be closed is the caller's rule.
    """
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in MESH_FORMATS:
        raise MeshError(
            f"the file type {path.suffix or '(none)'!r} is not a mesh format read here; "
            f"allowed: {', '.join('.' + f for f in MESH_FORMATS)}"
        )
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "no such file"
        raise MeshError(f"{what}; expected a mesh file ({', '.join(MESH_FORMATS)})")
    try:
        import trimesh
    except ImportError:
        raise MeshError(
            "reading mesh files needs the trimesh package (numpy only): pip install trimesh, "
            "or reinstall this package (pip install -e .), which depends on it"
        ) from None
    try:
        with _quiet(logging.getLogger("trimesh")):
            mesh = trimesh.load_mesh(str(path), file_type=suffix, process=True)
    except Exception as exc:  # noqa: BLE001 - a parser can fail in any way on a bad file
        raise MeshError(f"cannot read it as {suffix.upper()}: {exc}") from None
    vertices = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=np.float64)
    faces = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), dtype=np.int64)
    if len(faces) == 0 or not np.all(np.isfinite(vertices)):
        raise MeshError(
            f"holds no triangle: empty, or not a mesh trimesh can read as {suffix.upper()}"
        )
    matrix = placement_matrix(scale, rotate)
    placed = vertices @ matrix.T + np.asarray(translate, dtype=np.float64)
    triangles = placed[faces]
    size = float(np.max(placed.max(axis=0) - placed.min(axis=0)))
    area = 0.5 * np.linalg.norm(
        np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0]), axis=1
    )
    keep = area > AREA_TOLERANCE * size * size
    if not np.any(keep):
        raise MeshError(
            f"all its {len(faces)} triangles have zero area after scale = {list(scale)}"
        )
    open_edges = _open_edges(faces[keep])
    return Surface(triangles=triangles[keep], closed=open_edges == 0, open_edges=open_edges)


def _open_edges(faces: np.ndarray) -> int:
    """Edges (vertex pairs) that are not shared by exactly two triangles."""
    edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return int(np.count_nonzero(counts != 2))


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """Silences a logger for a block (trimesh logs parse warnings; errors are raised here)."""
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)
