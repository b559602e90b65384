"""Snapshots as numpy archives (particles_NNNNN.npz).

For machines where the vtk package is missing (the GPU box); `dambreak compare` and `render`
read these as they read .vtp files. Each archive holds the Snapshot's arrays under their field
names plus `time` and `step`, and is written atomically.

The archive is the one numpy's `savez` (or `savez_compressed`) makes, built here with zipfile
so that two things can be chosen. The compression (`output.npz_compression`): "none" (stored,
as `savez`) by default, or "deflate" at level 1 (not numpy's level 6, which took 2 to 3 times
as long for files 1 to 2 % smaller). Deflate makes the files 1.3 (a flowing state) to 3.5 (at
rest) times smaller, but on seed-case snapshots (263,784 particles) it took 75 to 210 ms a
file against 8 to 11 ms stored, and about 290 ms beside a busy time loop, more than the 265 ms
of physics between two snapshots of the seed case on the H200: the background writer would
fall behind and the loop wait (docs/performance.md, "Output"). And the members' date: fixed,
not the clock's, so that the same snapshot always gives the same bytes (a run and its resumed
twin, the background writer and a direct call).
"""

import io
import zipfile
from pathlib import Path

import numpy as np

from solver.output.files import atomic_target
from solver.snapshot import ARRAYS, Snapshot

NPZ_COMPRESSIONS: tuple[str, ...] = ("none", "deflate")
"""`output.npz_compression` choices, the default first."""

_ZIP_METHODS: dict[str, tuple[int, int | None]] = {
    "deflate": (zipfile.ZIP_DEFLATED, 1),
    "none": (zipfile.ZIP_STORED, None),
}
"""zipfile's (method, level) for each choice."""

_DATE = (1980, 1, 1, 0, 0, 0)
"""The members' date: the earliest a zip file can hold."""


def write_snapshot_npz(path: Path, snap: Snapshot, compression: str = NPZ_COMPRESSIONS[0]) -> None:
    """Write `snap` to `path` (.npz), atomically; `compression` is one of NPZ_COMPRESSIONS."""
    if compression not in _ZIP_METHODS:
        raise ValueError(f"npz compression {compression!r}: not one of {NPZ_COMPRESSIONS}")
    method, level = _ZIP_METHODS[compression]
    members = {"time": np.float64(snap.time), "step": np.int64(snap.step)}
    members |= {name: getattr(snap, name) for name in ARRAYS}
    with atomic_target(path) as temporary, zipfile.ZipFile(temporary, "w") as archive:
        for name, value in members.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_DATE)
            info.external_attr = 0o600 << 16  # as numpy's members: ?rw-------
            archive.writestr(info, member.getbuffer(), compress_type=method, compresslevel=level)


def read_snapshot_npz(path: Path) -> Snapshot:
    """Read a snapshot written by write_snapshot_npz, arrays exactly as written."""
    with np.load(path) as data:
        return Snapshot(
            time=float(data["time"]),
            step=int(data["step"]),
            **{name: data[name] for name in ARRAYS},
        )
