"""The simulation: a case's particles on the running Taichi backend and the time steps that
advance them (neighbour sort when needed, boundary density under mDBC, interaction, CFL time
step, integration), one at a time or in batches launched without a read-back between steps."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import taichi as ti

from solver.backend import running_arch
from solver.batch_size import batch_size
from solver.batch_sort import BatchSort, sort_points
from solver.config import Config
from solver.counting_region import EVERYWHERE
from solver.fused_step import build_verlet_step
from solver.integrate import (
    NO_LIMIT,
    REMOVED_DENSITY,
    REMOVED_OUTSIDE,
    at_time_step_floor,
    build_integrator,
    displacement_bound,
    lands_on_limit,
)
from solver.kept_state import KeptState
from solver.neighbor_lists import LIST_SKIN, NeighbourLists, uses_lists
from solver.neighbors import CellGrid, default_cells_per_support, default_x_refinement
from solver.output.device_probes import ProbePoints
from solver.parallel.reduce import SlotMaximum
from solver.particle_kind import ParticleKind
from solver.particles import STATE, ParticleArrays
from solver.phase_timer import untimed
from solver.physics.eos import tait_density, tait_pressure
from solver.physics.interaction import build_interaction, interaction_block_dim
from solver.physics.mdbc import build_boundary_density
from solver.physics.pair_halves import PairSums, uses_pair_halves
from solver.removal_log import RemovalLog
from solver.scene import Scene, build_scene
from solver.snapshot import STATE_KEYS, Snapshot
from solver.step_batch import (
    A_MAX,
    AT_FLOOR,
    DT,
    EVENTS,
    FLAGGED,
    HALTED,
    LANDED,
    LAST_PROBE,
    MAX_STEPS,
    MOVED,
    NO_PROBE,
    NONFINITE,
    PROBE_TIMES,
    PROBES_LEFT,
    REMAINING,
    SORTED,
    TAKEN,
    V_MAX,
    BatchControl,
    allocate_batch,
    build_batch_control,
)


def initial_density(cfg: Config, scene: Scene) -> np.ndarray:
    """Hydrostatic density in the fluid below the still-water level, rho0 elsewhere.

    As DualSPHysics' GenCase and OpenFPM start their dam breaks: rho = rho0 (rho0 |g| depth / B
    + 1)^(1/gamma) for fluid. Boundary particles start at rho0: a wall density is not reset
    where no fluid touches it, so a hydrostatic value on a dry floor would push the water off it.
    """
    surface = cfg.tank.box.min[2] + cfg.water_height
    depth = np.maximum(surface - scene.position[:, 2], 0.0)
    depth[scene.kind != ParticleKind.FLUID] = 0.0
    pressure = cfg.physics.rho0 * cfg.gravity_magnitude * depth
    return tait_density(pressure, cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma)


def resolve_skin(cfg: Config, pair_halves: bool) -> float:
    """neighbors.skin, or the running backend's default: 0.1 on GPUs, where the sort's many
    short launches cost more than the interaction itself; on the CPU, where the sort is cheap
    beside the interaction, 0 unless the pair halves read neighbour lists (`pair_halves` and
    neighbors.lists), which need the skin to outlast several steps: LIST_SKIN."""
    if cfg.neighbors.skin is not None:
        return cfg.neighbors.skin
    if running_arch() != "cpu":
        return 0.1
    return LIST_SKIN if pair_halves and cfg.neighbors.lists else 0.0


def resolve_cells_per_support(cfg: Config) -> int:
    """neighbors.cells_per_support, or the running backend's default (solver/neighbors.py)."""
    if cfg.neighbors.cells_per_support is not None:
        return cfg.neighbors.cells_per_support
    return default_cells_per_support(running_arch() == "cpu")


def resolve_x_refinement(cfg: Config) -> int:
    """neighbors.x_refinement, or the running backend's default for the case's grid
    (solver/neighbors.py)."""
    if cfg.neighbors.x_refinement is not None:
        return cfg.neighbors.x_refinement
    return default_x_refinement(
        running_arch() == "cpu",
        cfg.domain.min,
        cfg.domain.max,
        cfg.support_radius,
        resolve_cells_per_support(cfg),
    )


class Simulation:
    """The particle state of one case on the running Taichi backend, and its time step."""

    takes_pair_halves = True
    """Whether the CPU's interaction may take each fluid pair once (solver/physics/
    pair_halves.py): a process holding every particle; the distributed step gathers."""

    def __init__(self, cfg: Config, scene: Scene | None = None) -> None:
        self.cfg = cfg
        self.scene = scene if scene is not None else build_scene(cfg)
        capacity = len(self.scene.kind)
        self.symplectic = cfg.time.integrator == "symplectic"
        dtype = ti.f64 if cfg.physics.precision == "f64" else ti.f32
        self.particles = ParticleArrays(
            capacity,
            dtype,
            keep_position_prev=self.symplectic,
            keep_sps_stress=cfg.physics.viscosity == "laminar_sps",
        )
        density = initial_density(cfg, self.scene)
        pressure = tait_pressure(density, cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma)
        self.particles.load(
            self.scene.position, self.scene.kind, density, pressure, self.scene.ghost
        )
        self.grid = CellGrid(
            cfg.domain.min,
            cfg.domain.max,
            cfg.support_radius,
            capacity,
            resolve_cells_per_support(cfg),
            resolve_x_refinement(cfg),
        )
        self._maximum = SlotMaximum(3, dtype)
        self._last_slot = 0
        self._health = ti.ndarray(ti.i32, shape=2)
        self.nonfinite = 0
        """Particles the last step left with a NaN or infinite position, velocity or density."""
        self.at_dt_floor = False
        """Whether the last step's CFL step was at its floor time.dt_min (see health.py)."""
        self.landed = False
        """Whether the last step ended on its limit (the target of `advance`)."""
        self.flagged = 0
        """Fluid particles flagged for removal so far (each is flagged once, then dropped)."""
        self.removal_log = RemovalLog()
        """Where and why the dropped particles left (solver/removal_log.py)."""
        self._kept = KeptState()
        """The state `keep` kept (solver/kept_state.py); `keep_on_host` moves it to the host."""
        self._logged = 0
        """`flagged` at the last `log_removals`."""
        self._flagged_at_sort = 0
        """`flagged` at the last sort: those flagged since are still in the arrays, waiting
        for the host's next sort to drop them (solver/batch_sort.py)."""
        fluid = self.scene.count(ParticleKind.FLUID)
        pair_halves = uses_pair_halves(running_arch(), cfg, self.takes_pair_halves)
        self.skin = resolve_skin(cfg, pair_halves)
        # The skin's distance in the device's float type: the device decides with it when a
        # batch stops for a sort, the host whether to sort, from the same `moved` value.
        skin_bound = self.skin * cfg.support_radius
        self._skin_bound = skin_bound if dtype == ti.f64 else float(np.float32(skin_bound))
        listed = uses_lists(cfg, pair_halves, self.skin)
        self._interaction = build_interaction(
            cfg,
            self.skin,
            interaction_block_dim(running_arch(), fluid, cfg.physics.precision),
            pair_halves,
            listed,
        )
        self._pair_sums = PairSums(fluid, dtype).sums if pair_halves else None
        """The pair halves' sums on the CPU (solver/physics/pair_halves.py)."""
        self._lists = NeighbourLists(cfg, self.skin, capacity) if listed else None
        """The neighbour lists the pair halves and the mDBC pass read, built at each sort
        (solver/neighbor_lists.py); None: they walk the cells."""
        self._no_lists = ti.ndarray(ti.i32, shape=(1, 1)) if pair_halves else None
        """What the pair halves' kernels take for the lists' array when they walk."""
        self._integrator = build_integrator(cfg)
        self._boundary = (
            build_boundary_density(cfg, self.skin, spread_order=running_arch() == "cpu")
            if cfg.physics.boundary == "mdbc"
            else None
        )
        self._records = allocate_batch(dtype)
        self.probe_points = ProbePoints(cfg, dtype)
        """Where the probes read the field; a batch of steps samples them there."""
        self.probe_interval = self.probe_points.interval
        """Time between probe samples (None: the case has no probes)."""
        self._verlet_step_kernel = build_verlet_step(
            self._interaction,
            self._integrator,
            self.grid,
            self._boundary,
            self._batch_control(),
            self.probe_points,
            cfg.support_radius,
        )
        self._batch_sort = (
            BatchSort(self.grid, self.particles, self._batch_control())
            if self.skin > 0 and self._lists is None
            else None
        )
        """The sort a batch queues between its steps (solver/batch_sort.py); None without a
        skin, where every step needs a sort and the host sorts between one-step batches, and
        with neighbour lists, which the host builds after its sorts (on the CPU, where a batch
        ending costs no wait)."""
        self._full_step = (0.0, 0.0)
        """The last step not shortened to a target: its dt and how far it could move a
        particle (0: none yet), from which a batch's length is guessed."""
        self._until: float | None = None
        """The target time of the batches under way (None: the next batch sets one)."""
        self._remaining = 0.0
        """Time from now to `_until` as the device counts it (its float type)."""
        self.probe_index = 1
        """The next probe time is probe_index * probe_interval (the run samples t = 0 itself
        before the first step)."""
        self._probe_clock = (NO_PROBE, 0.0)
        """Where the next probe time lies before `_until`, as the device counts it: LAST_PROBE
        and PROBES_LEFT (solver/step_batch.py)."""
        self.probe_times: list[float] = []
        """Times of the steps of the last `advance` (or `step`) that passed a probe time."""
        self.probe_rows_filled = False
        """Whether the probes at `probe_times` were sampled into the probe rows (a batch of
        fused steps) or into `probe_sums` (steps taken alone)."""
        self.probe_sums: list[np.ndarray] = []
        """The sums at the probe points at each of `probe_times`, sampled by `probe_sampler`
        after a step taken alone that passed a probe time."""
        self.probe_sampler: Callable[[], np.ndarray] | None = None
        """Gives the sums at every probe point now (`DeviceProbes.point_sums`, which sets it);
        None: steps taken alone sample nothing."""
        self.while_batch_runs: Callable[[], None] | None = None
        """Host work to do once a batch's launches are queued, while the device runs them
        (the run's probe readings of the batch before; solver/run.py), instead of after the
        batch, when the device would wait for it. It must not touch the device."""
        self.batch_halted = False
        """Whether the last step counted stopped its batch (solver/step_batch.py events)."""
        self.moved = math.inf
        """Bound on how far any particle moved since the last sort (inf: sort now) [m]."""
        self.sorts = 0
        self.time = 0.0
        self.steps = 0
        self.dt = 0.0
        self.initial_fluid = self.scene.count(ParticleKind.FLUID)
        self.phase = untimed
        """Context-manager factory wrapped around each phase of a step (a `PhaseTimer` in
        benchmarks)."""

    def _batch_control(self) -> BatchControl:
        """The batch functions of this case's steps (solver/step_batch.py)."""
        return build_batch_control(self.cfg.time.dt_min, self._skin_bound, self.probe_interval)

    @property
    def count(self) -> int:
        """Particles alive (fluid and boundary)."""
        return self.particles.count

    @property
    def removed(self) -> int:
        """Fluid particles removed so far (left the domain or the density band)."""
        return sum(self.removed_by_reason().values())

    def removed_by_reason(self) -> dict[str, int]:
        """Particles dropped so far, by why (flags still pending count with their reason)."""
        dropped = self.grid.dropped.to_numpy()
        pending = np.bincount(self.particles.removed.to_numpy()[: self.count], minlength=3)
        return {
            "outside_domain": int(dropped[REMOVED_OUTSIDE] + pending[REMOVED_OUTSIDE]),
            "density_out_of_band": int(dropped[REMOVED_DENSITY] + pending[REMOVED_DENSITY]),
        }

    def _sort_if_needed(self, reach: float = 0.0) -> None:
        """Re-sort into cells (dropping flagged particles) once the skin may be used up.

        The interaction searches skin * 2H beyond the support around each particle's current
        position, over cells filled at the last sort, so it finds every neighbour as long as no
        particle has moved farther than that since (the Verlet-list argument of Verlet 1967,
        applied to cells as in Dominguez et al. 2011). `reach` bounds how far particles moved
        within the step so far (the symplectic predictor's half step).
        """
        if self.moved + reach <= self._skin_bound:
            return
        self._sort()

    def ensure_sorted(self) -> None:
        """Sort into cells if the particles never were: the cell grid of a fresh simulation is
        empty until its first step sorts it, and kernels that search neighbours between steps
        (the device probes) need it. The first step then finds the cells fresh (moved = 0) and
        does not sort again."""
        if self.sorts == 0:
            self._sort()

    def _sort(self) -> None:
        """Sort the live particles by (cell, id), dropping those flagged for removal."""
        self.log_removals()
        p = self.particles
        n = self.grid.update(p.position, p.id, p.removed, p.count, p.kind)
        p.reorder(self.grid.order, n)
        p.removed.fill(0)
        if self._lists is not None:
            self._lists.build(p.position, p.ghost, n, self.grid)
        self.moved = 0.0
        self.sorts += 1
        self._flagged_at_sort = self.flagged

    def log_removals(self) -> None:
        """Add the particles flagged since the last call to `removal_log`: before each sort
        drops them, and at the end of a run for those still waiting for a sort."""
        if self.flagged > self._logged:
            p = self.particles
            self.removal_log.record(self.time, self.steps, p, p.count)
            self._logged = self.flagged

    def _update_neighbours_and_forces(self, reach: float = 0.0) -> int:
        """Sort by cell when needed (`_sort_if_needed`), the boundary density (mDBC), then the
        interaction pass; returns the slot of `self._maximum.out` holding the maxima of the
        time-step rule."""
        with self.phase("neighbour sort"):
            self._sort_if_needed(reach)
        p = self.particles
        lo, inv_cell, dims, offsets = self.grid.kernel_args()
        if self._boundary is not None:
            with self.phase("boundary density"):
                args = (p.position, p.ghost, p.density, p.pressure, p.removed, p.count, lo,
                        inv_cell, dims, offsets)  # fmt: skip
                if self._lists is not None:
                    self._boundary.listed_kernel(*args, self._lists.lists)
                else:
                    self._boundary.kernel(*args)
        slot = self._last_slot = self._maximum.next_slot()
        with self.phase("interaction"):
            self._interaction.kernel(
                p.position,
                p.velocity,
                p.density,
                p.pressure,
                p.kind,
                p.removed,
                p.count,
                lo,
                inv_cell,
                dims,
                offsets,
                p.acceleration,
                p.density_rate,
                self._maximum.out,
                slot,
                *self._counting_region(),
                p.density_prev,
                self._lagged_diffusion(),
                *self._stress_arrays(),
                *self._pair_arrays(),
            )
            p.swap_stress()
        return slot

    def _pair_arrays(self) -> tuple:
        """The pair halves' arrays an interaction kernel takes last, (sums, lists) with the
        lists' array as it is now (`NeighbourLists.build` may replace it), or () where the
        interaction gathers."""
        if self._pair_sums is None:
            return ()
        lists = self._lists.lists if self._lists is not None else self._no_lists
        return (self._pair_sums, lists)

    def _stress_arrays(self) -> tuple:
        """The SPS stress arrays an interaction kernel takes last, (tau, tau_next) as they are
        now (each interaction swaps them), or () without the SPS closure."""
        p = self.particles
        return (p.tau, p.tau_next) if self._interaction.sps else ()

    def last_maxima(self) -> np.ndarray:
        """max |a|, max |v| (fluid) and the viscous rate of the last interaction, on the host."""
        return self._maximum.out.to_numpy()[self._last_slot]

    def _symplectic_arrays(self) -> tuple:
        """The arrays of the predictor and corrector kernels (a sort reorders them in place)."""
        p = self.particles
        return (p.position, p.velocity, p.density, p.position_prev, p.velocity_prev,
                p.density_prev, p.kind, p.acceleration, p.density_rate, p.pressure,
                p.removed)  # fmt: skip

    def _symplectic_step(self, slot: int, dt_limit: float):
        """Predictor, second interaction, corrector; returns (dt, max |a|, max |v|, non-finite,
        flagged), the counts of both halves added.

        The step moves a particle by dt v^n + dt^2 a^{n+1/2} / 2 (the corrector), the
        predictor by dt v^n / 2 before the second interaction, which sorts only if that may
        use up the skin. max |a| is the larger of the two interactions', so the step's
        `displacement_bound` covers the corrector's acceleration.
        """
        p = self.particles
        region = self._counting_region()
        with self.phase("integration"):
            taken = self._integrator.predict(
                *self._symplectic_arrays(), p.count, self._maximum.out, slot, dt_limit,
                self._health, *region,
            ).to_numpy()  # fmt: skip
        half_step = 0.5 * float(taken[0]) * float(taken[2])
        mid = self._update_neighbours_and_forces(half_step)
        with self.phase("integration"):
            corrected = self._integrator.correct(
                *self._symplectic_arrays(), p.count, float(taken[0]), self._maximum.out, mid,
                self._health, *region,
            ).to_numpy()  # fmt: skip
        taken[1] = max(taken[1], corrected[1])
        # both halves count non-finite and flagged particles
        taken[3:] = self._total_counts(taken[3:] + corrected[3:])
        return taken

    def _counting_region(self) -> tuple[float, float]:
        """The slab along x in which this simulation counts particles toward the step's
        figures (solver/counting_region.py): everywhere, for a single process."""
        return EVERYWHERE

    def _total_counts(self, counts: np.ndarray) -> np.ndarray:
        """The health counts of the whole run from this simulation's: its own, for a single
        process."""
        return counts

    def _lagged_diffusion(self) -> int:
        """1 if the next interaction evaluates the density diffusion on the previous step's
        densities: a Verlet step other than its Euler steps (solver/physics/interaction.py)."""
        return int(not self.symplectic and not self._euler_at(self.steps))

    def _euler_at(self, step: int) -> int:
        """1 if step number `step` (0 the first) is one where Verlet takes its Euler step
        (every verlet_euler_every)."""
        every = self.cfg.time.verlet_euler_every
        return int(step % every == every - 1)

    def _launch_step(
        self,
        k: int,
        slot: int,
        remaining: float,
        probe_clock: tuple[float, float],
        sort_follows: bool,
    ) -> None:
        """Launch step k of a batch (see solver/fused_step.py), then the batch's sort if
        `sort_follows` (solver/batch_sort.py): no read-back."""
        p = self.particles
        stress = self._stress_arrays()
        if k % 2:  # each step taken before this one swaps tau and tau_next
            stress = stress[::-1]
        self._verlet_step_kernel(
            p.position, p.ghost, p.velocity, p.velocity_prev, p.density, p.density_prev,
            p.pressure, p.kind, p.removed, p.count, self.grid.cell_offsets, p.acceleration,
            p.density_rate, self._maximum.out, slot, self._euler_at(self.steps + k),
            self._health, self._records, k, remaining, self.dt, self.moved, *probe_clock,
            float(self.flagged - self._flagged_at_sort), int(sort_follows),
            self.probe_points.points, self.probe_points.rows, *stress, *self._pair_arrays(),
        )  # fmt: skip
        if sort_follows:
            self._batch_sort(self._records, stress[::-1])

    def _step_batch(
        self,
        remaining: float,
        probe_clock: tuple[float, float],
        until: float | None,
        max_steps: int,
    ) -> None:
        """Sort when due, then launch up to `max_steps` Verlet steps back to back and read back
        their records once (solver/step_batch.py): the device stops the batch at the first
        step that lands on the target `remaining` seconds away, makes a sort due, fills the
        probe rows or finds the run unhealthy; the steps that pass a probe time (`probe_clock`,
        see `_target`) sample the probes. The host then counts each step taken as `step` does;
        a step landing on the target counts `until - time` (`remaining` itself when `until` is
        None, for a batch of one step)."""
        self._sort_if_needed()
        skin_left = self._skin_bound - self.moved
        if self._batch_sort is None:
            launches = batch_size(max_steps, remaining, skin_left, *self._full_step)
            sorts = set()
        else:
            launches = batch_size(max_steps, remaining, math.inf, *self._full_step)
            sorts = sort_points(launches, skin_left, self._skin_bound, self._full_step[1])
        slots = self._maximum.next_slots(launches)
        for k in range(launches):
            self._launch_step(k, slots[k], remaining, probe_clock, k in sorts)
        if self.while_batch_runs is not None:
            self.while_batch_runs()
        self._count_batch(slots, remaining, until)
        self.probe_rows_filled = True

    def _sample_probes_here(self) -> None:
        """After a step taken alone that passed a probe time: sample the probes now, into
        `probe_sums`."""
        self.probe_rows_filled = False
        if self.probe_sampler is not None:
            self.probe_sums.append(self.probe_sampler())

    def _count_batch(self, slots: list[int], remaining: float, until: float | None) -> None:
        """Read back the records of a batch launched into `slots` toward `until` (`remaining`
        seconds away) and count each step taken as `step` does (see `_step_batch`), with the
        probe times each passed."""
        records = self._records.to_numpy()
        taken = int(records[0, TAKEN])
        self._maximum.claim(taken)
        self._last_slot = slots[taken - 1]
        if taken % 2:
            self.particles.swap_stress()
        for record in records[1 : taken + 1]:
            self.nonfinite = int(record[NONFINITE])
            self.flagged += int(record[FLAGGED])
            events = int(record[EVENTS])
            self.at_dt_floor = bool(events & AT_FLOOR)
            self.landed = bool(events & LANDED)
            dt = float(record[DT])
            if self.landed:  # the exact target, which the device holds to its precision
                dt = until - self.time if until is not None else remaining
            else:
                reach = displacement_bound(dt, float(record[V_MAX]), float(record[A_MAX]))
                self._full_step = (dt, reach)
            self.dt = dt
            self.time += dt
            self.steps += 1
            self.sorts += int(record[SORTED])
            passed = int(record[PROBE_TIMES])
            if passed:
                self.probe_index += passed
                self.probe_times.append(self.time)
        self.moved = float(records[0, MOVED])
        self._remaining = float(records[0, REMAINING])
        self._probe_clock = (float(records[0, LAST_PROBE]), float(records[0, PROBES_LEFT]))
        self._until = None if self.landed else until
        self.batch_halted = bool(records[0, HALTED])

    def _verlet_step(self, slot: int, dt_limit: float):
        """One Verlet (or Euler) update after a separate interaction launch; returns (dt,
        max |a|, max |v|, non-finite, flagged)."""
        p = self.particles
        euler = self._euler_at(self.steps)
        with self.phase("integration"):
            return self._integrator.verlet(
                p.position,
                p.velocity,
                p.velocity_prev,
                p.density,
                p.density_prev,
                p.kind,
                p.acceleration,
                p.density_rate,
                p.pressure,
                p.removed,
                p.count,
                self._maximum.out,
                slot,
                dt_limit,
                self.dt,
                euler,
                self._health,
            ).to_numpy()

    @property
    def _batched(self) -> bool:
        """Whether steps run in batches of fused kernels: Verlet, unless a benchmark times the
        phases (separate kernels, synchronised). The symplectic scheme stays host-driven, one
        step at a time: its mid-step sort needs the host."""
        return self.phase is untimed and not self.symplectic

    def step(self, dt_limit: float = math.inf) -> None:
        """Advance one time step: the CFL step, shortened to `dt_limit` when that is smaller
        (so a run lands exactly on its output times).

        The step is taken on the device from the maxima of the interaction. A Verlet step is
        one kernel launch (plus a sort when due), then one read-back of its record; `advance`
        takes many steps per read-back.
        """
        self._forget_probe_times()
        self._step(dt_limit)

    def _forget_probe_times(self) -> None:
        """Start the list of probe times passed (before `step` or `advance` steps)."""
        self.probe_times = []
        self.probe_sums = []

    def _step(self, dt_limit: float) -> None:
        """`step`, adding to the probe times passed so far."""
        dt_limit = min(dt_limit, NO_LIMIT)
        if self._batched:
            self._step_batch(dt_limit, (NO_PROBE, 0.0), None, 1)
            self._pass_probe_times()
            return
        slot = self._update_neighbours_and_forces()
        if self.symplectic:
            taken = self._symplectic_step(slot, dt_limit)
        else:
            taken = self._verlet_step(slot, dt_limit)
        dt, a_max, v_max = (float(value) for value in taken[:3])
        self.nonfinite = int(taken[3])
        self.flagged += int(taken[4])
        self.at_dt_floor = at_time_step_floor(dt, dt_limit, self.cfg.time.dt_min)
        self.landed = lands_on_limit(dt, dt_limit)
        if self.landed:
            # Shortened to the limit, which the device holds only to its float precision:
            # count it as the exact limit, so that the run lands on its output times.
            dt = dt_limit
        self.moved += displacement_bound(dt, v_max, a_max)
        self.dt = dt
        self.time += dt
        self.steps += 1
        self._until = None
        self._pass_probe_times()

    def _pass_probe_times(self) -> None:
        """After a step taken alone on the host: count the probe times it passed (in f64,
        within the relative 1e-9 the run's schedules allow) and sample the probes if any."""
        if self.probe_interval is None:
            return
        passed = 0
        while self.time >= self.probe_index * self.probe_interval * (1.0 - 1e-9):
            self.probe_index += 1
            passed += 1
        if passed:
            self.probe_times.append(self.time)
            self._sample_probes_here()

    def _target(self, until: float) -> tuple[float, tuple[float, float]]:
        """The device's time left to `until` and its probe clock (LAST_PROBE, PROBES_LEFT;
        solver/step_batch.py): carried from the last batch while the target is the same, else
        taken afresh. A probe time within the run schedules' relative 1e-9 of the target
        counts as on it, so that the step landing there passes it."""
        if until == self._until:
            return self._remaining, self._probe_clock
        if self.probe_interval is None or not math.isfinite(until):
            return min(until, NO_LIMIT) - self.time, (NO_PROBE, 0.0)
        last = math.floor(until / self.probe_interval * (1.0 + 1e-9))
        last_probe = max(until - last * self.probe_interval, 0.0)
        if last_probe <= 1e-9 * until:
            last_probe = 0.0
        return until - self.time, (last_probe, float(max(last - self.probe_index, -1)))

    def advance(self, until: float, max_steps: int = MAX_STEPS) -> None:
        """Take up to `max_steps` steps toward simulated time `until`, landing on it exactly,
        with no read-back between steps where the scheme allows (Verlet, see `_batched`); a
        batch takes at most MAX_STEPS, the rows of its records (solver/step_batch.py).

        Returns early, after the step concerned, when a step lands on `until`, when a sort
        is due (the next call sorts first), when the run's health needs a look (a
        non-finite value, the time step at its floor; see solver/health.py) or when the probe
        rows are full. Within one target the result does not depend on how the steps are
        split into calls: the device's count of the remaining time goes on from call to call,
        in the device's float type. Takes no step when `until` is not ahead.

        The steps that pass a probe time are listed in `probe_times`, and the probes sampled
        there (`probe_rows_filled`; solver/output/device_probes.py `DeviceProbes.take_sums`).
        """
        self._forget_probe_times()
        if until <= self.time:
            return
        if not self._batched:
            for _ in range(max_steps):
                self._step(until - self.time)
                if self.landed or self.nonfinite or self.at_dt_floor:
                    return
            return
        self._step_batch(*self._target(until), until, min(max_steps, MAX_STEPS))

    def snapshot(self) -> Snapshot:
        """The live particles now, with pressure from the current density."""
        p = self.particles
        snap = p.snapshot(self.time, self.steps)
        keep = p.removed.to_numpy()[: p.count] == 0
        if keep.all():
            return snap
        return Snapshot(
            snap.time,
            snap.step,
            snap.position[keep],
            snap.velocity[keep],
            snap.density[keep],
            snap.pressure[keep],
            snap.kind[keep],
            snap.id[keep],
        )

    # ------------------------------------------------------------------ checkpoint support

    def _carried_arrays(self) -> dict[str, ti.Ndarray]:
        """Every device array a later step reads before writing it, by name.

        The particle state (with position_prev for the symplectic scheme and the current SPS
        stress tau under laminar_sps; tau_next is rewritten by every interaction before it is
        read), the removal flags still waiting for a sort, the interaction's outputs (cheap,
        and they keep a restored step independent of which arrays the kernels happen to
        rewrite first), and the cell grid's offsets and drop counters: with a skin the next
        steps reuse the last sort's cells without sorting again. The sort's own buffers (keys,
        order) are rebuilt by every sort before they are read, and the reorder's scratch only
        carries data within a sort.
        """
        p, g = self.particles, self.grid
        arrays = {f"particles.{name}": getattr(p, name) for name in STATE}
        if p.position_prev is not None:
            arrays["particles.position_prev"] = p.position_prev
        if p.tau is not None:
            arrays["particles.tau"] = p.tau
        for name in ("removed", "acceleration", "density_rate"):
            arrays[f"particles.{name}"] = getattr(p, name)
        arrays["grid.cell_offsets"] = g.cell_offsets
        arrays["grid.dropped"] = g.dropped
        return arrays

    def state(self) -> dict[str, np.ndarray]:
        """A host copy of everything the next steps depend on (see `restore`).

        Arrays are whole (capacity long, not cut at the live count), so that a restored run
        reads exactly the bytes this one would; scalars are 0-d arrays of their exact value.
        """
        state = {name: array.to_numpy() for name, array in self._carried_arrays().items()}
        state["count"] = np.int64(self.particles.count)
        return state | self._clock_state()

    def snapshot_state(self) -> dict[str, np.ndarray]:
        """The part of `state()` a snapshot is cut from (STATE_KEYS: `snapshot_from_state`),
        alone copied off the device: 44 of the state's 94 bytes a particle in the seed case."""
        arrays = self._carried_arrays()
        state = {key: arrays[key].to_numpy() for key in STATE_KEYS if key in arrays}
        state["count"] = np.int64(self.particles.count)
        clock = self._clock_state()
        return state | {key: clock[key] for key in STATE_KEYS if key in clock}

    def keep(self) -> None:
        """Keep the state now, the last good one of a run, as a copy on the device (a copy
        to the host at every output time cost the GPUs more than the output;
        solver/kept_state.py), or on the host after `keep_on_host`; `kept_state` brings it to
        the host."""
        scalars = {"count": np.int64(self.particles.count)} | self._clock_state()
        self._kept.keep(self._carried_arrays(), scalars)

    def compile_batch_sort(self) -> None:
        """Compile the sort a batch queues (solver/batch_sort.py), changing nothing; without a
        skin there is none."""
        if self._batch_sort is not None:
            self._batch_sort.compile(self._records, self._stress_arrays())

    def keep_on_host(self) -> None:
        """Have `keep` copy the state to the host instead (where the device has no room for a
        copy: solver/memory.py `check_memory`)."""
        self._kept = KeptState(on_device=False)

    def kept_state(self) -> dict[str, np.ndarray]:
        """What `state()` returned when `keep` was last called, bit for bit."""
        return self._kept.to_host()

    def _clock_state(self) -> dict[str, np.ndarray]:
        """The scalars of `state()` besides the count: steps, sorts, time, and where the
        batches and the skin stand."""
        return {
            "steps": np.int64(self.steps),
            "sorts": np.int64(self.sorts),
            "time": np.float64(self.time),
            "dt": np.float64(self.dt),
            "moved": np.float64(self.moved),
            "flagged": np.int64(self.flagged),
            "until": np.float64(math.nan if self._until is None else self._until),
            "remaining": np.float64(self._remaining),
            "probe_index": np.int64(self.probe_index),
            "last_probe": np.float64(self._probe_clock[0]),
            "probes_left": np.float64(self._probe_clock[1]),
            "removal_log": self.removal_log.rows(),
            "logged": np.int64(self._logged),
        }

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Put this simulation (built from the same config) into `state`, taken by `state()`.

        The next step then computes bit for bit what it would have computed in the simulation
        that took the state, on the same backend and precision. A state whose cell grid has
        another cell size (`neighbors.cells_per_support` or `neighbors.x_refinement`: a
        checkpoint of another backend, whose default differs, solver/neighbors.py) leaves its
        cell offsets behind, and the next step sorts the particles into this simulation's grid.
        """
        arrays = self._carried_arrays()
        missing = sorted(set(arrays) - set(state))
        if missing:
            raise ValueError(f"state lacks {', '.join(missing)} (another integrator?)")
        regrid = False
        for name, array in arrays.items():
            values = state[name]
            if values.shape != array.shape + tuple(array.element_shape):
                if name == "grid.cell_offsets":
                    regrid = True
                    continue
                raise ValueError(f"state array {name} has shape {values.shape}, not this case's")
            array.from_numpy(values)
        self.particles.count = int(state["count"])
        self.steps = int(state["steps"])
        self.sorts = int(state["sorts"])
        self.time = float(state["time"])
        self.dt = float(state["dt"])
        self.moved = math.inf if regrid else float(state["moved"])
        self.flagged = int(state["flagged"])
        # A batch's target and the device's count of the time to it (absent from checkpoints
        # written before batches existed): the next batch goes on with them.
        until = float(state.get("until", math.nan))
        self._until = None if math.isnan(until) else until
        self._remaining = float(state.get("remaining", 0.0))
        # Where the probes stand (absent from checkpoints written before the batches sampled
        # them: the first probe time after the checkpoint's).
        if "probe_index" in state:
            self.probe_index = int(state["probe_index"])
            self._probe_clock = (float(state["last_probe"]), float(state["probes_left"]))
        elif self.probe_interval is not None:
            self.probe_index = int(self.time / self.probe_interval * (1.0 + 1e-9)) + 1
            self._until = None
        # The removal log (absent from checkpoints written before it existed: an empty log, and
        # the flags pending in the state are logged at the next sort).
        self.removal_log = RemovalLog(state.get("removal_log"))
        self._logged = int(state.get("logged", len(self.removal_log)))
        pending = state["particles.removed"][: self.particles.count]
        self._flagged_at_sort = self.flagged - int(np.count_nonzero(pending))
        if self._lists is not None and not regrid:
            # Found from the positions now, not at the sort: every pair that comes within the
            # support before the next sort is still listed, in the walk's order, so the steps
            # read the same sums (solver/neighbor_lists.py).
            p = self.particles
            self._lists.build(p.position, p.ghost, p.count, self.grid)
