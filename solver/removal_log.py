"""Where and why particles left the run: one row per removed particle, as DualSPHysics keeps
its excluded particles (PartOut, written by its PartVTKOut tool).

A fluid particle is flagged for removal when it leaves the domain or the density band
(solver/integrate.py) and stays frozen where it was flagged until the next sort drops it. Just
before that sort drops them, `RemovalLog.record` copies the flagged particles' id, position,
velocity, density and reason; the run writes them as removed.csv (`write_removed_csv`). The
time of a row is the time of the sort that dropped the particle, at most one skin's worth of
steps after it was flagged; its position is where it was flagged.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from solver.integrate import REMOVED_DENSITY, REMOVED_OUTSIDE
from solver.output.files import atomic_write_text

if TYPE_CHECKING:
    from solver.particles import ParticleArrays

REMOVED_CSV = "removed.csv"
"""The file a run writes the log to, in its output folder (only when a particle was removed)."""

COLUMNS: tuple[str, ...] = ("time", "step", "id", "x", "y", "z", "vx", "vy", "vz", "density")
"""The numeric columns of a row; the reason follows as text."""

REASONS: dict[int, str] = {
    REMOVED_OUTSIDE: "outside_domain",
    REMOVED_DENSITY: "density_out_of_band",
}
"""The removal flags of solver/integrate.py by name, as summary.json counts them."""


class RemovalLog:
    """The removed particles of a run so far: rows of COLUMNS plus the reason flag."""

    def __init__(self, rows: np.ndarray | None = None) -> None:
        """An empty log, or one holding `rows` (as `rows` gives them, e.g. from a checkpoint)."""
        width = len(COLUMNS) + 1
        self._rows = [] if rows is None else [np.asarray(rows, dtype=np.float64).reshape(-1, width)]

    def record(self, time: float, step: int, particles: ParticleArrays, count: int) -> None:
        """Add the particles flagged among the first `count` of `particles`, by id."""
        reason = particles.removed.to_numpy()[:count]
        flagged = np.flatnonzero(reason)
        if flagged.size == 0:
            return
        rows = np.empty((flagged.size, len(COLUMNS) + 1), dtype=np.float64)
        rows[:, 0] = time
        rows[:, 1] = step
        rows[:, 2] = particles.id.to_numpy()[flagged]
        rows[:, 3:6] = particles.position.to_numpy()[flagged]
        rows[:, 6:9] = particles.velocity.to_numpy()[flagged]
        rows[:, 9] = particles.density.to_numpy()[flagged]
        rows[:, 10] = reason[flagged]
        self._rows.append(rows[np.argsort(rows[:, 2], kind="stable")])

    def rows(self) -> np.ndarray:
        """Every row so far, (k, len(COLUMNS) + 1), in the order they were removed."""
        if not self._rows:
            return np.zeros((0, len(COLUMNS) + 1), dtype=np.float64)
        return np.concatenate(self._rows)

    def __len__(self) -> int:
        return sum(len(r) for r in self._rows)


def write_removed_csv(path: Path, rows: np.ndarray) -> None:
    """removed.csv: a header, then one line per removed particle (atomically)."""
    lines = [",".join([*COLUMNS, "reason"])]
    for row in rows:
        numbers = [repr(float(row[0])), str(int(row[1])), str(int(row[2]))]
        numbers += [repr(float(v)) for v in row[3:10]]
        lines.append(",".join([*numbers, REASONS.get(int(row[10]), str(int(row[10])))]))
    atomic_write_text(path, "\n".join(lines) + "\n")
