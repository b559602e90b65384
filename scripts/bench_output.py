"""Measure what a snapshot costs: the copies off the device the time loop makes, and the file
writes the background writer makes (docs/performance.md, "Output").

Usage: python3 scripts/bench_output.py [CONFIG] [--backend B] [--steps S] [--repeat R]
           [--out DIR] [--set key=value ...]

Builds the scene (default: the seed case), takes S steps so that the state is not the lattice
at rest, then times, best of R: `sim.snapshot()` (the particles' copy the loop made before
issue 12), `sim.state()` (the whole state: what the loop copied at every output time until
2026-12-03), `sim.snapshot_state()` (what a snapshot copies now), `sim.keep()` (the last good
state kept on the device, synchronised), cutting the snapshot from the state, and writing the
snapshot as .vtp with
each compressor (when the vtk package is there) and as .npz with each compression, and with
numpy's savez_compressed (the .npz before issue 12), with the file sizes. Files go to a
temporary folder (made inside --out when given: another disk).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import taichi as ti  # noqa: E402

from solver.backend import start_backend  # noqa: E402
from solver.config import load_config  # noqa: E402
from solver.output.npz import NPZ_COMPRESSIONS, write_snapshot_npz  # noqa: E402
from solver.output.vtk import VTK_COMPRESSIONS, write_snapshot  # noqa: E402
from solver.output.writer import held_bytes  # noqa: E402
from solver.simulation import Simulation  # noqa: E402
from solver.snapshot import ARRAYS, snapshot_from_state  # noqa: E402


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """The shortest of `repeat` timed calls of `action` [s]."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs" / "dambreak.toml"))
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--out", help="where to make the temporary folder of the files (default: the system's)"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    cfg = load_config(Path(args.config), args.overrides)
    info = start_backend(args.backend, cfg.physics.precision, None)
    sim = Simulation(cfg)
    for _ in range(args.steps):
        sim.step()
    state = sim.state()
    snap = snapshot_from_state(state)

    def kept() -> None:
        sim.keep()
        ti.sync()

    state_bytes = held_bytes(state.values())
    print(
        f"{cfg.name} on {info.name} ({info.device}): {snap.count} particles, t = {sim.time:.4g} s"
    )
    rows = [
        (
            "copy: sim.snapshot()",
            best_of(args.repeat, sim.snapshot),
            held_bytes(getattr(snap, name) for name in ARRAYS),
        ),
        ("copy: sim.state()", best_of(args.repeat, sim.state), state_bytes),
        (
            "copy: sim.snapshot_state()",
            best_of(args.repeat, sim.snapshot_state),
            held_bytes(sim.snapshot_state().values()),
        ),
        ("keep: sim.keep() on the device", best_of(args.repeat, kept), state_bytes),
        ("cut: snapshot_from_state", best_of(args.repeat, lambda: snapshot_from_state(state)), 0),
    ]
    with tempfile.TemporaryDirectory(dir=args.out) as folder:
        try:
            import vtkmodules  # noqa: F401

            has_vtk = True
        except ImportError:
            has_vtk = False
        for compression in VTK_COMPRESSIONS if has_vtk else ():
            path = Path(folder) / f"s-{compression}.vtp"
            seconds = best_of(args.repeat, partial(write_snapshot, path, snap, compression))
            rows.append((f"write .vtp {compression}", seconds, path.stat().st_size))
        for compression in NPZ_COMPRESSIONS:
            path = Path(folder) / f"s-{compression}.npz"
            seconds = best_of(args.repeat, partial(write_snapshot_npz, path, snap, compression))
            rows.append((f"write .npz {compression}", seconds, path.stat().st_size))
        # The .npz as written before issue 12, for comparison: numpy's deflate, level 6.
        path = Path(folder) / "s-numpy.npz"
        arrays = {name: getattr(snap, name) for name in ARRAYS}
        seconds = best_of(args.repeat, partial(np.savez_compressed, path, **arrays))
        rows.append(("np.savez_compressed", seconds, path.stat().st_size))
    print(f"{'what':32} {'ms':>8} {'MB':>8}")
    for name, seconds, nbytes in rows:
        print(f"{name:32} {1e3 * seconds:8.1f} {nbytes / 1e6:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
