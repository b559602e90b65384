"""Neighbours within the support per particle, as `dambreak bench` and `dambreak run` report
them: the pairs closer than the support, once per particle per step, as DualSPHysics counts
them for its PIPS figure (Dominguez et al. 2013, "New multi-GPU implementation for smoothed
particle hydrodynamics on heterogeneous clusters", CPC 184). Multiplied by particle-steps per
second they give neighbour interactions per second, a speed that compares codes whose kernels
hold different numbers of neighbours."""

from __future__ import annotations

import taichi as ti

from solver.neighbors import count_neighbours
from solver.parallel.reduce import Reducer
from solver.simulation import Simulation


def neighbours_per_particle(sim: Simulation) -> float:
    """Neighbours within the support per particle, now (the cells of the last sort, searched
    as far as the interaction searches; removed particles count as having none)."""
    return NeighbourCounter(sim)()


class NeighbourCounter:
    """`neighbours_per_particle` of one simulation, taken again and again (a run counts at
    every output time) without allocating its device arrays each time."""

    def __init__(self, sim: Simulation) -> None:
        capacity = max(sim.particles.count, 1)
        self._sim = sim
        self._reducer = Reducer(capacity)
        self._counts = ti.ndarray(ti.f32, shape=capacity)
        self._total = ti.ndarray(ti.f32, shape=1)

    def __call__(self) -> float:
        """Neighbours within the support per particle now (see `neighbours_per_particle`)."""
        sim = self._sim
        p = sim.particles
        lo, inv_cell, dims, offsets = sim.grid.kernel_args()
        radius = sim.cfg.support_radius
        count_neighbours(
            p.position, p.removed, p.count, radius, radius * (1.0 + sim.skin), lo, inv_cell,
            dims, offsets, self._counts,
        )  # fmt: skip
        self._reducer.sum(self._counts, p.count, self._total)
        return float(self._total.to_numpy()[0]) / max(p.count, 1)


class NeighbourTally:
    """The mean number of neighbours per particle over the steps of a run, from counts taken
    at a few moments (the run's output times): between two counts the number is taken to vary
    linearly, so each interval's steps are weighted by the mean of its two ends."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None
        self._weighted = 0.0
        self._steps = 0

    def add(self, neighbours: float, step: int) -> None:
        """A count of `neighbours` per particle (`neighbours_per_particle`) taken after step
        number `step` of the run."""
        if self._last is not None and step > self._last[1]:
            last, last_step = self._last
            self._weighted += (step - last_step) * 0.5 * (last + neighbours)
            self._steps += step - last_step
        self._last = (neighbours, step)

    @property
    def mean(self) -> float | None:
        """Neighbours per particle over the steps between the first and the last count (the
        one count itself where no step ran between counts; None before any)."""
        if self._steps:
            return self._weighted / self._steps
        return self._last[0] if self._last is not None else None
