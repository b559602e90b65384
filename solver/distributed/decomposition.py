"""Slabs along x: which process owns which columns of the cell grid, and where the halos lie.

The domain is cut across its long axis (x in every shipped case: the dam break runs along it)
into K slabs of whole cell columns (cells of equal cx). Slabs follow the particles: their
boundaries are placed so that each holds about N / K particles, from the histogram of particles
per column, and are moved when the most loaded slab exceeds the mean by more than the
rebalance threshold (checked at every neighbour sort, the only moment particles change hands).
Why slabs: docs/scaling.md.

A process owns the particles whose cell (at the last sort) lies in its columns, and holds
copies (ghosts) of the particles in the `halo` columns on either side: enough that every
particle it owns, and every particle that may enter its slab before the next sort, sees all
its neighbours and all the boundary particles whose mDBC ghost nodes it feeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solver.counting_region import BIG


@dataclass(frozen=True)
class Slabs:
    """K slabs of cell columns: slab r is columns [starts[r], starts[r + 1])."""

    starts: tuple[int, ...]
    """K + 1 column indices, 0 first and the grid's column count last."""
    halo: int
    """Columns of ghosts kept on either side of a slab."""

    @property
    def ranks(self) -> int:
        """Number of slabs (processes)."""
        return len(self.starts) - 1

    @property
    def columns(self) -> int:
        """Cell columns of the grid."""
        return self.starts[-1]

    def owner(self, column: np.ndarray) -> np.ndarray:
        """The slab of each column index."""
        return np.searchsorted(np.asarray(self.starts[1:-1]), column, side="right")

    def in_halo(self, column: np.ndarray, rank: int) -> np.ndarray:
        """Whether each column lies in the halo of slab `rank` (near it, not in it)."""
        begin, end = self.starts[rank], self.starts[rank + 1]
        near = (column >= begin - self.halo) & (column < end + self.halo)
        return near & ((column < begin) | (column >= end))

    def loads(self, histogram: np.ndarray) -> np.ndarray:
        """Particles in each slab, from particles per column."""
        totals = np.concatenate([[0], np.cumsum(histogram)])
        return totals[list(self.starts[1:])] - totals[list(self.starts[:-1])]

    def imbalance(self, histogram: np.ndarray) -> float:
        """The most loaded slab's particles over the mean (1: perfectly balanced)."""
        loads = self.loads(histogram)
        mean = loads.sum() / self.ranks
        return float(loads.max() / mean) if mean > 0 else 1.0

    def region(self, rank: int, lo_x: float, cell: float, dtype) -> tuple[float, float]:
        """The counting region of slab `rank` along x (solver/counting_region.py): the planes
        of its first and last columns in the device's float type, open to infinity at the
        ends, so that the regions of all slabs partition the line."""

        def plane(column: int) -> float:
            return float(dtype(lo_x + column * cell))

        low = -BIG if rank == 0 else plane(self.starts[rank])
        high = BIG if rank == self.ranks - 1 else plane(self.starts[rank + 1])
        return low, high


def balanced_slabs(histogram: np.ndarray, ranks: int, halo: int) -> Slabs:
    """Slabs of about equal particle counts over columns with `histogram` particles each;
    every slab keeps at least one column."""
    columns = len(histogram)
    if ranks > columns:
        raise ValueError(f"{ranks} processes for a grid of {columns} cell columns along x")
    cumulative = np.cumsum(histogram, dtype=np.float64)
    total = cumulative[-1] if columns else 0.0
    starts = [0]
    for r in range(1, ranks):
        target = total * r / ranks
        column = int(np.searchsorted(cumulative, target, side="left")) + 1
        column = min(max(column, starts[-1] + 1), columns - (ranks - r))
        starts.append(column)
    starts.append(columns)
    return Slabs(tuple(starts), halo)


def halo_columns(
    support: float, reach: float, moved: float, ghost_reach: float, cell: float
) -> int:
    """Columns of ghosts a slab needs (see the module).

    `support` is the kernel support 2H, `reach` the neighbour search radius (2H (1 + skin)),
    `moved` how far a particle may move between sorts (the skin plus one step, since a sort
    comes the step after the bound is crossed), `ghost_reach` the longest x-component of an
    mDBC ghost vector (0 under DBC). A particle counted in the slab was sorted at most `moved`
    outside it; its search touches the cells within `reach` of where it is, and its neighbours
    were sorted within `support` + 2 `moved` of it. A boundary particle among them takes its
    density from the cells within `reach` of its ghost node, `ghost_reach` farther on. One
    column more covers the rounding of positions to columns.
    """
    neighbours = support + 3.0 * moved
    if ghost_reach > 0.0:
        neighbours += ghost_reach + reach
    return math.ceil(max(moved + reach, neighbours) / cell) + 1
