"""Snapshots as compressed numpy archives (particles_NNNNN.npz).

For machines where the vtk package is missing (the GPU box); `dambreak compare` and `render`
read these as they read .vtp files. Each archive holds the Snapshot's arrays under their field
names plus `time` and `step`, and is written atomically.
"""

from pathlib import Path

import numpy as np

from solver.output.files import atomic_target
from solver.snapshot import Snapshot

ARRAYS = ("position", "velocity", "density", "pressure", "kind", "id")


def write_snapshot_npz(path: Path, snap: Snapshot) -> None:
    """Write `snap` to `path` (.npz), atomically."""
    with atomic_target(path) as temporary, open(temporary, "wb") as file:
        np.savez_compressed(
            file,
            time=np.float64(snap.time),
            step=np.int64(snap.step),
            **{name: getattr(snap, name) for name in ARRAYS},
        )


def read_snapshot_npz(path: Path) -> Snapshot:
    """Read a snapshot written by write_snapshot_npz, arrays exactly as written."""
    with np.load(path) as data:
        return Snapshot(
            time=float(data["time"]),
            step=int(data["step"]),
            **{name: data[name] for name in ARRAYS},
        )
