"""Checkpoints: one file, checkpoint.npz, from which `dambreak run --resume DIR` continues a
stopped run bit for bit.

It holds the simulation's `state()` (every device array a later step reads, whole, with the
step counter, time, last dt, sort count and skin bookkeeping), the observers' `state()` (output
schedule, snapshots written, .pvd entries, probes.csv text) and, as JSON, the resolved config,
the backend, the precision and the dambreak version. Only the latest checkpoint is kept (as
DualSPHysics keeps its last PART): it is written whole under a temporary name, fsync'ed and
renamed onto the old one, so a crash at any moment leaves the previous checkpoint or the new
one. The archive is plain numpy (no pickle), uncompressed: writing it is as fast as the disk.
A run hands its checkpoints to the background writer (solver/output/writer.py) behind the
snapshots taken before them, or drains the writer first, so that a checkpoint never counts a
snapshot that is not yet on disk.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solver.output.files import atomic_write_bytes

CHECKPOINT_NAME = "checkpoint.npz"
FORMAT = 1
"""Version of the file layout; a checkpoint of another layout is refused."""

_STATE_PREFIX = "state/"
_META = "meta"


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or does not fit the run that wants to resume."""


@dataclass(frozen=True)
class Checkpoint:
    """Everything a resumed run needs. `state` is `Simulation.state()`, `observers` is
    `RunObservers.state()`, `config` the resolved config as TOML (`config_to_toml`) and
    `config_source` the file it came from; `checkpoint_every` the run's checkpoint interval."""

    state: dict[str, np.ndarray]
    observers: dict[str, Any]
    config: str
    config_source: str
    backend: str
    precision: str
    version: str
    checkpoint_every: float | None

    @property
    def time(self) -> float:
        """The simulated time of the state [s]."""
        return float(self.state["time"])

    @property
    def steps(self) -> int:
        """Steps taken to reach the state."""
        return int(self.state["steps"])


def write_checkpoint(out_dir: Path, checkpoint: Checkpoint) -> Path:
    """Write `checkpoint` as out_dir/checkpoint.npz, atomically; returns the path."""
    meta = {
        "format": FORMAT,
        "observers": checkpoint.observers,
        "config": checkpoint.config,
        "config_source": checkpoint.config_source,
        "backend": checkpoint.backend,
        "precision": checkpoint.precision,
        "version": checkpoint.version,
        "checkpoint_every": checkpoint.checkpoint_every,
    }
    arrays = {_STATE_PREFIX + name: value for name, value in checkpoint.state.items()}
    arrays[_META] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path = Path(out_dir) / CHECKPOINT_NAME
    atomic_write_bytes(path, buffer.getvalue())
    return path


def read_checkpoint(out_dir: Path) -> Checkpoint:
    """Read out_dir/checkpoint.npz; CheckpointError says what is wrong with it."""
    path = Path(out_dir) / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"no checkpoint in {out_dir} (looked for {CHECKPOINT_NAME})")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays.pop(_META).tobytes().decode("utf-8"))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{path} is not a readable checkpoint: {error}") from None
    if meta.get("format") != FORMAT:
        found = meta.get("format")
        raise CheckpointError(f"{path} has layout {found}; this dambreak reads {FORMAT}")
    return Checkpoint(
        state={k.removeprefix(_STATE_PREFIX): v for k, v in arrays.items()},
        observers=meta["observers"],
        config=meta["config"],
        config_source=meta["config_source"],
        backend=meta["backend"],
        precision=meta["precision"],
        version=meta["version"],
        checkpoint_every=meta["checkpoint_every"],
    )
