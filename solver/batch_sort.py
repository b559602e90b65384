"""The neighbour sort inside a batch of steps: queued by the host, decided by the device.

A batch of steps (solver/step_batch.py) used to stop at the step that used up the skin, and the
host then read the batch back, sorted, and launched the next batch. On the H200 a small case
sorts every 15 steps or so, and each of those batch ends was a synchronisation: the host read
back, sorted (the cell count returned the live count: a synchronising launch) and prepared the
next launches while the device waited. With the sort queued inside the batch, SPHERIC test 2's
batches run 44 steps instead of 12, but its run time did not change measurably: the step's
kernels, not the batch ends, bound it (the device busy 85 to 98 % of the run;
docs/performance.md, "The sort inside the batch").

So the host queues the sort itself between the steps of a batch, where it expects one to fall
due, and the device decides whether it runs: the sort's two launches (`CellGrid`'s cell count
and sort, then the reorder of the state) run their loops over zero particles unless the
step before used up the skin (`BatchControl.sort_due`), and a step followed by a queued sort
does not stop the batch for that sort. The decision is the host's own rule, taken on the same
`moved` value (the skin bound in the device's float type, solver/simulation.py), so the
particles are sorted after the same steps and into the same order as by the host: the run is
bitwise the one the host's sorts give, however its steps fall into batches.

Two things stay with the host:
- a sort that would drop particles flagged for removal: the host logs them first
  (solver/removal_log.py), so a batch with particles flagged since the last sort stops for
  the sort as before (the control row's PENDING count); without drops the live count stays
  the same and the next steps' loop bounds hold;
- a sort due after a step with no sort queued after it (the guess below was wrong), which
  stops the batch as before.

The reorder gathers the state into a scratch array and copies it back, as the host's sort does
(solver/particles.py): the steps queued after the sort were launched with the state's arrays,
so the state must stay in them (the copies cost a read and a write of the state, about 10
microseconds at SPHERIC's size on the H200, against 15 steps of about 1 ms between sorts).

Where the host queues sorts (`sort_points`): the step k that uses up the skin is expected at
the skin left over the last full step's reach (as solver/batch_size.py guesses), then every
skin bound over that reach after each sort; a sort is queued after the expected step and after
its neighbours on either side, since the reach changes a little from step to step. A queued
sort that is not due costs the host two launches and the device a few empty tasks.
"""

import math
from collections.abc import Callable

import numpy as np
import taichi as ti

from solver.neighbors import CellGrid
from solver.particles import ParticleArrays, reorder_state
from solver.step_batch import HALTED, BatchControl, allocate_batch

Array = ti.types.ndarray(ndim=1)

WINDOW = 1
"""Sorts are queued after the expected step and WINDOW steps on either side of it."""


def sort_points(launches: int, skin_left: float, skin_bound: float, step_reach: float) -> set[int]:
    """The steps k (0-based, below `launches`) of a batch after which the host queues a sort:
    around the step expected to use up the `skin_left` still unused, then around every step
    expected to use up a whole `skin_bound` after that, at `step_reach` a step (see the
    module). No reach known yet (0): none, and the first sort due stops the batch."""
    if step_reach <= 0.0 or skin_bound <= 0.0:
        return set()
    first = math.floor(max(skin_left, 0.0) / step_reach)
    period = math.floor(skin_bound / step_reach) + 1
    points = set()
    expected = first
    while expected - WINDOW < launches:
        points.update(range(max(expected - WINDOW, 0), min(expected + WINDOW + 1, launches)))
        expected += period
    return points


def _build_reorder_when(due: Callable, mark_sorted: Callable, sps: bool):
    """The kernel that reorders the state by the grid's `order` in place
    (solver/particles.py, `reorder_state`), when due(control) (see the module), then records
    the sort with mark_sorted(control)."""

    @ti.func
    def reorder(
        order: ti.template(),
        n,
        control: ti.template(),
        state: ti.template(),
        scratch: ti.template(),
        extra: ti.template(),
    ):
        reorder_state(order, ti.select(due(control), n, 0), state, scratch, extra)
        if due(control):
            mark_sorted(control)

    @ti.kernel
    def reorder_when(
        order: ti.types.ndarray(dtype=ti.i32, ndim=1),
        n: ti.i32,
        control: Array,
        position: Array,
        velocity: Array,
        velocity_prev: Array,
        density: Array,
        density_prev: Array,
        pressure: Array,
        kind: Array,
        ids: Array,
        ghost: Array,
        vectors: Array,
        whole: Array,
    ):
        reorder(
            order, n, control,
            (position, velocity, velocity_prev, density, density_prev, pressure, kind, ids,
             ghost),
            (vectors, whole), (),
        )  # fmt: skip

    @ti.kernel
    def reorder_when_sps(
        order: ti.types.ndarray(dtype=ti.i32, ndim=1),
        n: ti.i32,
        control: Array,
        position: Array,
        velocity: Array,
        velocity_prev: Array,
        density: Array,
        density_prev: Array,
        pressure: Array,
        kind: Array,
        ids: Array,
        ghost: Array,
        vectors: Array,
        whole: Array,
        tau: Array,
        tau_next: Array,
    ):
        reorder(
            order, n, control,
            (position, velocity, velocity_prev, density, density_prev, pressure, kind, ids,
             ghost),
            (vectors, whole), ((tau, tau_next),),
        )  # fmt: skip

    return reorder_when_sps if sps else reorder_when


class BatchSort:
    """The sort a batch queues between two of its steps (see the module) for `particles` on
    `grid`, decided by the batch's control row."""

    def __init__(self, grid: CellGrid, particles: ParticleArrays, batch: BatchControl) -> None:
        self.grid = grid
        self.particles = particles
        self._update_when = grid.build_update_when(batch.sort_due)
        self._reorder_when = _build_reorder_when(
            batch.sort_due, batch.mark_sorted, particles.tau is not None
        )

    def compile(self, like: ti.Ndarray, stress: tuple) -> None:
        """Compile the sort's kernels now, sorting nothing: they are launched with the control
        row of a halted batch (a fresh batch array like `like`), on which `sort_due` is false,
        so they change nothing, as a queued sort that is not due changes nothing. `dambreak
        bench` calls this before its timed steps and `dambreak run` with its first step, where
        the first queued sort would otherwise compile them inside the stepping (seconds on the
        CPU, and a device idle meanwhile on small GPU cases)."""
        rows = np.zeros_like(like.to_numpy())
        rows[0, HALTED] = 1.0
        halted = allocate_batch(like.dtype)
        halted.from_numpy(rows)
        self(halted, stress)

    def __call__(self, control: ti.Ndarray, stress: tuple) -> None:
        """Queue the sort after a step of the batch whose control row is `control`; `stress` is
        (tau as that step left it, tau_next) under the SPS closure, else ()."""
        p, grid = self.particles, self.grid
        self._update_when(p.position, p.id, p.removed, p.count, p.kind, control)
        self._reorder_when(grid.order, p.count, control, *p.state_arrays(), *p.scratch, *stress)
