"""One Verlet step as three kernels, so that processes can agree on the step between them.

The one-launch step (solver/fused_step.py) takes its time step on the device from the maxima
of its own interaction, and decides from its own counts whether the batch stops. Under domain
decomposition those figures are global: the maxima and counts of every process must be
combined first (an MPI allreduce; a maximum is exact in any order, a count is an integer). So
the step is cut where the combination goes, into kernels built from the very Taichi functions
of the fused step, in the same order:

1. `interact`: the batch's control row, the mDBC boundary pass, the interaction (maxima from
   the particles of the process's counting region, solver/counting_region.py);
2. `update`: the CFL step from the (combined) maxima, the Verlet update (flag counts from the
   counting region); it keeps dt in the control row's spare column for the last kernel;
3. `finish`: the step's record from the (combined) health counts: whether it landed on the
   target, made a sort due, reached the dt floor or found a non-finite value.

Each is launched as step 0 of a batch of one (solver/step_batch.py), whose result does not
depend on how steps are split into batches, so a step here computes what the fused kernel
computes.
"""

from collections.abc import Callable
from typing import NamedTuple

import taichi as ti

from solver.integrate import Integrator
from solver.neighbors import CellGrid
from solver.parallel.reduce import clear_slot
from solver.physics.interaction import Interaction
from solver.physics.mdbc import BoundaryDensity
from solver.step_batch import DT_PREV, REMAINING, SPARE, BatchControl


class StepPhases(NamedTuple):
    """The three kernels of a step (see the module). `interact` takes tau and tau_next after
    its other arguments under the SPS closure, as the interaction kernel does."""

    interact: Callable
    update: Callable
    finish: Callable


def build_step_phases(
    interaction: Interaction,
    integrator: Integrator,
    grid: CellGrid,
    boundary: BoundaryDensity | None,
    batch: BatchControl,
) -> StepPhases:
    """The phase kernels of a Verlet step on `grid`; `boundary` is the mDBC pass, None under
    DBC. `interaction` gathers (several processes never take the CPU's pair halves:
    solver/physics/pair_halves.py)."""
    if interaction.pair_halves:
        raise ValueError("the distributed step gathers its neighbour sums (pair_halves.py)")
    mdbc = boundary is not None
    verlet_particle = integrator.verlet_particle
    lo, inv_cell, dims, _ = grid.kernel_args()

    @ti.func
    def interact_loops(
        position: ti.template(),
        ghost: ti.template(),
        velocity: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        kind: ti.template(),
        removed: ti.template(),
        n,
        cell_offsets: ti.template(),
        acceleration: ti.template(),
        density_rate: ti.template(),
        maxima: ti.template(),
        slot,
        records: ti.template(),
        remaining,
        dt_prev,
        moved,
        last_probe,
        probes_left,
        region_lo,
        region_hi,
        stress: ti.template(),
        density_prev: ti.template(),
        lagged,
    ):
        batch.begin(records, 0, remaining, dt_prev, moved, last_probe, probes_left, 0.0)
        live = batch.live_count(records, n)
        if batch.running(records):
            clear_slot(maxima, 1 - slot)  # for the next step (see SlotMaximum)
        # The sort files the fluid first (solver/neighbors.py), halo copies included: under
        # mDBC the boundary pass runs over the boundary block alone, the interaction over the
        # fluid alone.
        if ti.static(mdbc):
            boundary.loop(
                live, position, ghost, density, pressure, removed, lo, inv_cell, dims,
                cell_offsets, (),
            )  # fmt: skip
        interaction.gather(
            live, position, velocity, density, pressure, kind, removed, lo, inv_cell, dims,
            cell_offsets, acceleration, density_rate, maxima, slot, stress,
            ti.Vector([region_lo, region_hi]), density_prev, lagged,
        )  # fmt: skip

    @ti.kernel
    def phase_interact(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        cell_offsets: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        records: ti.types.ndarray(ndim=1),
        remaining: float,
        dt_prev: float,
        moved: float,
        last_probe: float,
        probes_left: float,
        region_lo: float,
        region_hi: float,
        density_prev: ti.types.ndarray(ndim=1),
        lagged: ti.i32,
    ):
        interact_loops(
            position, ghost, velocity, density, pressure, kind, removed, n, cell_offsets,
            acceleration, density_rate, maxima, slot, records, remaining, dt_prev, moved,
            last_probe, probes_left, region_lo, region_hi, (), density_prev, lagged,
        )  # fmt: skip

    @ti.kernel
    def phase_interact_sps(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        cell_offsets: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        records: ti.types.ndarray(ndim=1),
        remaining: float,
        dt_prev: float,
        moved: float,
        last_probe: float,
        probes_left: float,
        region_lo: float,
        region_hi: float,
        density_prev: ti.types.ndarray(ndim=1),
        lagged: ti.i32,
        tau: ti.types.ndarray(ndim=1),
        tau_next: ti.types.ndarray(ndim=1),
    ):
        interact_loops(
            position, ghost, velocity, density, pressure, kind, removed, n, cell_offsets,
            acceleration, density_rate, maxima, slot, records, remaining, dt_prev, moved,
            last_probe, probes_left, region_lo, region_hi, (tau, tau_next), density_prev,
            lagged,
        )  # fmt: skip

    @ti.kernel
    def phase_update(
        position: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        euler: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        records: ti.types.ndarray(ndim=1),
        region_lo: float,
        region_hi: float,
    ):
        live = batch.live_count(records, n)
        dt = integrator.device_time_step(maxima[slot], records[0][REMAINING])
        span = integrator.verlet_span(dt, records[0][DT_PREV])
        if batch.running(records):
            integrator.clear_health(health)
        for i in range(live):
            verlet_particle(
                i, position, velocity, velocity_prev, density, density_prev, kind, acceleration,
                density_rate, pressure, removed, dt, span, euler, health,
                ti.Vector([region_lo, region_hi]),
            )  # fmt: skip
        records[0][SPARE] = dt

    @ti.kernel
    def phase_finish(
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        records: ti.types.ndarray(ndim=1),
    ):
        if batch.running(records):
            batch.finish(records, 0, records[0][SPARE], maxima[slot], health, 0)

    return StepPhases(
        phase_interact_sps if interaction.sps else phase_interact, phase_update, phase_finish
    )
