"""A whole Verlet step in one kernel launch: boundary density (mDBC), interaction, time step
and update.

A Taichi kernel launch from Python costs about 0.1 ms of host time on the H200's host (more
with many array arguments), and the device idles while the host prepares it: at the seed
case's size that is as much as the interaction's own GPU time. One kernel holding the three
passes as consecutive top-level loops is launched once; Taichi runs its loops one after the
other on the device, so the update still reads the finished interaction and the time step
taken from its maxima. The particle functions are those of the separate kernels, which the
benchmarks' phase timing uses, so both paths compute the same results.

The kernel returns nothing: it takes part in a batch of steps launched back to back
(solver/step_batch.py), reading the remaining time and the last dt from the batch array and
writing its record there, and it does nothing once an earlier step of the batch has stopped
it. A kernel that returned its time step would make every launch wait for the device. A step
that passes a probe time samples the probes last, into the batch's next probe row
(solver/output/device_probes.py), so probes every millisecond do not stop the batch.
"""

import taichi as ti

from solver.counting_region import everywhere
from solver.integrate import Integrator
from solver.neighbors import CellGrid
from solver.output.device_probes import ProbePoints
from solver.parallel.reduce import clear_slot
from solver.physics.interaction import Interaction
from solver.physics.mdbc import BoundaryDensity
from solver.step_batch import DT_PREV, MOVED, REMAINING, BatchControl


def build_verlet_step(
    interaction: Interaction,
    integrator: Integrator,
    grid: CellGrid,
    boundary: BoundaryDensity | None,
    batch: BatchControl,
    probes: ProbePoints,
    support_radius: float,
):
    """The kernel of one Verlet step on `grid`, as step k of a batch (see `BatchControl`).

    `boundary` is the mDBC pass, None under DBC. `probes` are the case's probe points,
    sampled (within `support_radius` of each, plus the skin bound `moved`) by a step that
    passes a probe time; a case without probes compiles no probe loop. The grid's geometry is
    compiled in rather than passed: every argument adds to the host's cost of a launch,
    vectors most; for that reason the SPS closure (`interaction.sps`) gets a kernel of its
    own, which takes tau and tau_next after the other arguments, as the interaction kernel
    does, and so do the CPU's pair halves (`interaction.pair_halves`), which take the `sums`
    of a PairSums (solver/physics/pair_halves.py). `remaining`, `dt_prev`, `moved` and the
    probe clock are read by the batch's first kernel only (k = 0).
    """
    mdbc = boundary is not None
    verlet_particle = integrator.verlet_particle
    device_time_step = integrator.device_time_step
    lo, inv_cell, dims, _ = grid.kernel_args()
    sampled = probes.interval is not None
    point_sums, n_points = probes.point_sums, probes.count

    @ti.func
    def step(
        position: ti.template(),
        ghost: ti.template(),
        velocity: ti.template(),
        velocity_prev: ti.template(),
        density: ti.template(),
        density_prev: ti.template(),
        pressure: ti.template(),
        kind: ti.template(),
        removed: ti.template(),
        n,
        cell_offsets: ti.template(),
        acceleration: ti.template(),
        density_rate: ti.template(),
        maxima: ti.template(),
        slot,
        euler,
        health: ti.template(),
        records: ti.template(),
        k,
        remaining,
        dt_prev,
        moved,
        last_probe,
        probes_left,
        pending,
        sort_follows,
        points: ti.template(),
        probe_rows: ti.template(),
        stress: ti.template(),
        lists: ti.template(),
    ):
        """The step's loops; called at a kernel's top level, they stay its parallel loops.
        `stress` holds the interaction's own arrays: (tau, tau_next) under the SPS closure,
        (sums,) with the pair halves, else (); `lists` the neighbour lists, (lists,) where the
        pair halves read them (solver/neighbor_lists.py), else ()."""
        batch.begin(records, k, remaining, dt_prev, moved, last_probe, probes_left, pending)
        live = batch.live_count(records, n)
        if batch.running(records):
            clear_slot(maxima, 1 - slot)  # for the next step (see SlotMaximum)
        # The sort files the fluid first (solver/neighbors.py): under mDBC the boundary pass
        # runs over the boundary block alone and the interaction over the fluid alone.
        if ti.static(mdbc):
            boundary.loop(
                live, position, ghost, density, pressure, removed, lo, inv_cell, dims,
                cell_offsets, lists,
            )  # fmt: skip
        if ti.static(interaction.pair_halves):
            interaction.loops(
                live, position, velocity, density, pressure, kind, removed, lo, inv_cell, dims,
                cell_offsets, acceleration, density_rate, maxima, slot, (), everywhere(),
                density_prev, euler == 0, stress[0], lists,
            )  # fmt: skip
        else:
            interaction.gather(
                live, position, velocity, density, pressure, kind, removed, lo, inv_cell, dims,
                cell_offsets, acceleration, density_rate, maxima, slot, stress, everywhere(),
                density_prev, euler == 0,
            )  # fmt: skip
        # Taken even in a halted kernel (whose update loop is empty): assigned under a
        # condition, dt compiled to other roundings of the update on the CPU (1 ulp in
        # positions), and the batched steps would no longer equal the single steps.
        dt = device_time_step(maxima[slot], records[0][REMAINING])
        span = integrator.verlet_span(dt, records[0][DT_PREV])
        if batch.running(records):
            integrator.clear_health(health)
        for i in range(live):
            verlet_particle(
                i, position, velocity, velocity_prev, density, density_prev, kind, acceleration,
                density_rate, pressure, removed, dt, span, euler, health, everywhere(),
            )  # fmt: skip
        if batch.running(records):
            batch.finish(records, k, dt, maxima[slot], health, sort_follows)
        if ti.static(sampled):
            row = batch.probe_row(records, k)
            radius = support_radius + records[0][MOVED]
            for q in range(ti.select(row >= 0, n_points, 0)):
                probe_rows[row, q] = point_sums(
                    points[q], position, density, pressure, removed, radius, lo, inv_cell,
                    dims, cell_offsets,
                )  # fmt: skip

    @ti.kernel
    def interact_and_verlet(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        cell_offsets: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        euler: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        records: ti.types.ndarray(ndim=1),
        k: ti.i32,
        remaining: float,
        dt_prev: float,
        moved: float,
        last_probe: float,
        probes_left: float,
        pending: float,
        sort_follows: ti.i32,
        points: ti.types.ndarray(ndim=1),
        probe_rows: ti.types.ndarray(ndim=2),
    ):
        step(
            position, ghost, velocity, velocity_prev, density, density_prev, pressure, kind,
            removed, n, cell_offsets, acceleration, density_rate, maxima, slot, euler, health,
            records, k, remaining, dt_prev, moved, last_probe, probes_left, pending,
            sort_follows, points,
            probe_rows, (), (),
        )  # fmt: skip

    @ti.kernel
    def interact_and_verlet_sps(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        cell_offsets: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        euler: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        records: ti.types.ndarray(ndim=1),
        k: ti.i32,
        remaining: float,
        dt_prev: float,
        moved: float,
        last_probe: float,
        probes_left: float,
        pending: float,
        sort_follows: ti.i32,
        points: ti.types.ndarray(ndim=1),
        probe_rows: ti.types.ndarray(ndim=2),
        tau: ti.types.ndarray(ndim=1),
        tau_next: ti.types.ndarray(ndim=1),
    ):
        step(
            position, ghost, velocity, velocity_prev, density, density_prev, pressure, kind,
            removed, n, cell_offsets, acceleration, density_rate, maxima, slot, euler, health,
            records, k, remaining, dt_prev, moved, last_probe, probes_left, pending,
            sort_follows, points,
            probe_rows, (tau, tau_next), (),
        )  # fmt: skip

    @ti.kernel
    def interact_and_verlet_pair_halves(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        velocity: ti.types.ndarray(ndim=1),
        velocity_prev: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        density_prev: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        kind: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        cell_offsets: ti.types.ndarray(ndim=1),
        acceleration: ti.types.ndarray(ndim=1),
        density_rate: ti.types.ndarray(ndim=1),
        maxima: ti.types.ndarray(ndim=1),
        slot: ti.i32,
        euler: ti.i32,
        health: ti.types.ndarray(dtype=ti.i32, ndim=1),
        records: ti.types.ndarray(ndim=1),
        k: ti.i32,
        remaining: float,
        dt_prev: float,
        moved: float,
        last_probe: float,
        probes_left: float,
        pending: float,
        sort_follows: ti.i32,
        points: ti.types.ndarray(ndim=1),
        probe_rows: ti.types.ndarray(ndim=2),
        sums: ti.types.ndarray(ndim=2),
        lists: ti.types.ndarray(dtype=ti.i32, ndim=2),
    ):
        step(
            position, ghost, velocity, velocity_prev, density, density_prev, pressure, kind,
            removed, n, cell_offsets, acceleration, density_rate, maxima, slot, euler, health,
            records, k, remaining, dt_prev, moved, last_probe, probes_left, pending,
            sort_follows, points,
            probe_rows, (sums,), (lists,) if ti.static(interaction.lists) else (),
        )  # fmt: skip

    if interaction.sps:
        return interact_and_verlet_sps
    return interact_and_verlet_pair_halves if interaction.pair_halves else interact_and_verlet
