"""A simulation split into slabs over the processes of an MPI job, with the same answer as one.

Each process runs the solver's own kernels over the particles it owns (its slab, see
decomposition.py) and the ghosts around them (halo.py), and the processes agree on what a
single process decides alone: the time step (the maxima of every slab, combined by an exact
MPI maximum), the run's health (integer counts, summed), and when to sort (from the combined
maxima, so the same step everywhere). The solver orders particles by (cell, id) and sums
each particle's neighbours in that order; a process holds every particle of every cell its
particles reach, in the same order, so each particle's sums, and so every snapshot, are bit
for bit those of one process.

At a sort each process computes its particles' cells on the device (the sort's own
functions), drops those flagged for removal, rebalances the slabs when one holds more than
REBALANCE_THRESHOLD over the mean, sends particles that left its slab to their new owner and
its halo rows to each neighbour (mpi4py), and orders what it holds by (cell, id) with the
solver's device sort; only the rows that move cross the host link (migration.py). The first
sort and a restore, where every process holds every particle, pick each one's share on the
host instead, without communication. Snapshots and checkpoints gather the owned particles on
rank 0 in that same global order, so a checkpoint is the one a single process writes and
resumes on any number of them.
"""

from __future__ import annotations

import time as wallclock

import numpy as np
import taichi as ti

from solver.batch_size import batch_size
from solver.config import Config, ConfigError
from solver.distributed.decomposition import Slabs, balanced_slabs, halo_columns
from solver.distributed.halo import HaloExchange
from solver.distributed.migration import RowStaging, moved_names
from solver.distributed.step_phases import build_step_phases
from solver.distributed.world import World
from solver.integrate import REMOVED_DENSITY, REMOVED_OUTSIDE
from solver.neighbors import DROP_REASONS, cell_keys
from solver.parallel.gather import whole
from solver.physics.mdbc import in_reach
from solver.physics.sps import STRESS_COMPONENTS
from solver.scene import Scene
from solver.simulation import Simulation
from solver.snapshot import Snapshot, snapshot_from_state

PASSING = DROP_REASONS - 1
"""The flag that leaves a held particle out of a sort: it passes to another process, or is a
ghost that the sort replaces."""

REBALANCE_THRESHOLD = 0.1
"""Rebalance the slabs at a sort once the most loaded one holds more than this fraction over
the mean."""

STEP_REACH = 0.1
"""A bound, in h, on how far one step moves a particle: the CFL rule keeps dt v below
0.2 h / 10 and dt^2 a / 2 below 0.02 h (Monaghan and Kos 1999), so 0.1 h is generous."""


class DistributedSimulation(Simulation):
    """The `Simulation` of one process of `world` (rank 0 gathers the output)."""

    takes_pair_halves = False  # its step phases gather (solver/physics/pair_halves.py)

    def __init__(self, cfg: Config, world: World, scene: Scene | None = None) -> None:
        super().__init__(cfg, scene)
        self.world = world
        self._phases = build_step_phases(
            self._interaction,
            self._integrator,
            self.grid,
            self._boundary,
            self._batch_control(),
        )
        ghost_reach = 0.0
        computed = self.scene.ghost[in_reach(self.scene.ghost, cfg.support_radius)]
        if self._boundary is not None and len(computed):
            ghost_reach = float(np.abs(computed[:, 0]).max())
        reach = cfg.support_radius * (1.0 + self.skin)
        moved = self._skin_bound + STEP_REACH * cfg.smoothing_length
        self._halo_columns = halo_columns(
            cfg.support_radius, reach, moved, ghost_reach, self.grid.cell_sizes[0]
        )
        self._columns = int(self.grid.dims[0])
        if world.size > self._columns:
            raise ConfigError(
                f"{cfg.source}: {world.size} processes for a domain of {self._columns} cell "
                f"columns ({self.grid.cell_sizes[0]:.4g} m wide) along x; each process needs one "
                "at least: use fewer processes or a smaller particles.dp"
            )
        self.slabs: Slabs | None = None
        """The decomposition (set by the first sort, moved by rebalancing)."""
        self._region = (0.0, 0.0)
        self._holds_all = True
        """Whether this process still holds every particle (before the first sort, and after
        a restore): the next sort then picks its share without communication."""
        self._keys = np.zeros(0, np.int32)
        """The cell of each held particle at the last sort (host copy, local order)."""
        self._origin = np.zeros(0, np.int32)
        """The owner of each held particle (this rank for its own, else a ghost)."""
        self._dropped = np.zeros(DROP_REASONS, np.int64)
        """Owned particles dropped at sorts, by the reason they were flagged."""
        self._global_count = self.particles.count
        stress = STRESS_COMPONENTS if self.particles.tau is not None else 0
        self._halo = HaloExchange(world, self.particles.dtype, stress)
        self._staging = RowStaging(self.particles)
        self._cells = ti.ndarray(ti.i32, shape=max(self.particles.capacity, 1))
        """Each held particle's cell now, as a sort computes them."""
        self._sorted_this_step = False
        self.rebalances = 0
        self._imbalance = (0, 0.0, 0.0)
        """Sorts measured, the largest and the sum of the imbalance (the most loaded slab's
        particles over the mean) seen at them, before any rebalancing."""
        self.sort_exchange_s = 0.0
        """Wall time of the sorts' migration and halo rebuild (host and MPI)."""
        self.gather_s = 0.0
        """Wall time of gathering the state on rank 0 (snapshots, checkpoints)."""
        self._gathered: tuple[int, float, dict[str, np.ndarray]] | None = None
        """The steps, time and `state()` of the last `keep` or `snapshot_state`."""

    # -------------------------------------------------------------------------- what is held

    @property
    def count(self) -> int:
        """Particles alive in the whole job (fluid and boundary; flagged ones until a sort)."""
        return self._global_count

    def _array_names(self) -> list[str]:
        """The per-particle arrays of a checkpoint: those that move with a particle, and the
        work arrays."""
        return moved_names(self.particles) + ["removed", "acceleration", "density_rate"]

    def _download(self) -> dict[str, np.ndarray]:
        n = self.particles.count
        return {name: getattr(self.particles, name).to_numpy()[:n] for name in self._array_names()}

    def _upload(self, rows: dict[str, np.ndarray], keys: np.ndarray, origin: np.ndarray) -> None:
        """Hold `rows` (sorted by (key, id)) with their cells `keys`: the particle arrays, the
        cell grid's offsets and the exchange lists."""
        p = self.particles
        n = len(keys)
        for name, values in rows.items():
            array = getattr(p, name)
            array.from_numpy(whole(values, array))
        p.count = n
        self.grid.cell_offsets.from_numpy(_cell_offsets(keys, self.grid.num_keys))
        self._index(keys, origin)

    def _index(self, keys: np.ndarray, origin: np.ndarray) -> None:
        """Take note of the held particles' cells `keys` and owners `origin` (in held order,
        the cell grid filled): the exchange lists, the job's particle count."""
        self._keys, self._origin = keys.astype(np.int32), origin.astype(np.int32)
        columns = self._keys % self._columns
        owned = self._origin == self.world.rank
        send, receive = {}, {}
        for q in range(self.world.size):
            if q != self.world.rank:
                send[q] = np.nonzero(owned & self.slabs.in_halo(columns, q))[0]
                receive[q] = np.nonzero(self._origin == q)[0]
        self._halo.set_lists(send, receive)
        self._global_count = int(self.world.sum(np.array([np.count_nonzero(owned)]))[0])

    def _set_slabs(self, slabs: Slabs) -> None:
        self.slabs = slabs
        dtype = np.float64 if self.particles.dtype == ti.f64 else np.float32
        self._region = slabs.region(
            self.world.rank, self.grid.lo[0], self.grid.cell_sizes[0], dtype
        )

    def _take_share(self, rows: dict[str, np.ndarray], keys: np.ndarray, drop: bool) -> None:
        """From every particle (all processes hold the same `rows`), keep this process's slab
        and its halo; `drop` removes the flagged ones (a sort) instead of keeping them (a
        restore)."""
        columns = keys % self._columns
        live = rows["removed"] == 0 if drop else np.ones(len(keys), bool)
        histogram = np.bincount(columns[live], minlength=self._columns)
        if self.slabs is None:
            self._set_slabs(balanced_slabs(histogram, self.world.size, self._halo_columns))
        self._measure(self.slabs.imbalance(histogram))
        owner = self.slabs.owner(columns)
        mine = owner == self.world.rank
        if drop:
            self._count_drops(rows["removed"][mine & ~live])
            rows = dict(rows, removed=np.zeros_like(rows["removed"]))
        held = live & (mine | self.slabs.in_halo(columns, self.world.rank))
        self._hold({k: v[held] for k, v in rows.items()}, keys[held], owner[held])

    def _measure(self, imbalance: float) -> None:
        sorts, largest, total = self._imbalance
        self._imbalance = (sorts + 1, max(largest, imbalance), total + imbalance)

    def _count_drops(self, reasons: np.ndarray) -> None:
        self._dropped += np.bincount(np.minimum(reasons, DROP_REASONS - 1), minlength=DROP_REASONS)

    def _hold(self, rows: dict[str, np.ndarray], keys: np.ndarray, origin: np.ndarray) -> None:
        order = np.lexsort((rows["id"], keys))
        self._upload({k: v[order] for k, v in rows.items()}, keys[order], origin[order])

    # ---------------------------------------------------------------------------- the sort

    def _sort(self) -> None:
        """Re-sort: drop flagged particles, rebalance if needed, migrate, rebuild the halo."""
        started = wallclock.perf_counter()
        p = self.particles
        n = p.count
        lo, inv_cell, dims, _ = self.grid.kernel_args()
        cell_keys(p.position, p.kind, n, lo, inv_cell, dims, self._cells)
        keys = self._cells.to_numpy()[:n]
        if self._holds_all:
            self._take_share(self._download(), keys, drop=True)
            self._holds_all = False
        else:
            self._migrate(keys)  # both leave every flag cleared
        self.moved = 0.0
        self.sorts += 1
        self._sorted_this_step = True
        self.sort_exchange_s += wallclock.perf_counter() - started

    def _migrate(self, keys: np.ndarray) -> None:
        """Send owned particles to their (new) owners and halo copies to the neighbours, the
        rows moving on the device (migration.py); `keys` are the held particles' cells now."""
        world, rank, p = self.world, self.world.rank, self.particles
        removed = p.removed.to_numpy()[: p.count]
        owned = self._origin == rank
        self._count_drops(removed[owned & (removed != 0)])
        kept = np.nonzero(owned & (removed == 0))[0]
        columns = keys[kept] % self._columns
        histogram = world.sum(np.bincount(columns, minlength=self._columns).astype(np.int64))
        imbalance = self.slabs.imbalance(histogram)
        self._measure(imbalance)
        if imbalance > 1.0 + REBALANCE_THRESHOLD:
            balanced = balanced_slabs(histogram, world.size, self._halo_columns)
            if balanced.imbalance(histogram) < imbalance:  # whole columns may allow no better
                self._set_slabs(balanced)
                self.rebalances += 1
        owner = self.slabs.owner(columns)
        leaving = kept[owner != rank]
        to, leaving_keys = owner[owner != rank], keys[leaving]
        rows = self._staging.take(leaving)
        arrived = world.alltoall(
            [
                ({k: v[to == q] for k, v in rows.items()}, leaving_keys[to == q])
                for q in range(world.size)
            ]  # fmt: skip
        )
        staying = np.zeros(p.count, bool)
        staying[kept[owner == rank]] = True
        start = self._sort_held(np.where(staying, 0, PASSING).astype(np.int32))
        own_keys = [self.grid.sorted_keys.to_numpy()[:start]] + [part[1] for part in arrived]
        for part in arrived:
            self._staging.put(part[0], start)
            start += len(part[1])
        own_columns = np.concatenate(own_keys) % self._columns
        copies = world.alltoall(
            [
                self._staging.take(np.nonzero(self.slabs.in_halo(own_columns, q))[0])
                if q != rank
                else None
                for q in range(world.size)
            ]  # fmt: skip
        )
        origin = [np.full(start, rank)]
        for q, copy in enumerate(copies):
            if copy is not None:
                self._staging.put(copy, start)
                start += len(copy["id"])
                origin.append(np.full(len(copy["id"]), q))
        p.count = start
        p.removed.fill(0)
        self._sort_held(None)
        order = self.grid.order.to_numpy()[: p.count]
        self._index(self.grid.sorted_keys.to_numpy()[: p.count], np.concatenate(origin)[order])

    def _sort_held(self, flags: np.ndarray | None) -> int:
        """Sort the held particles by (cell, id) with the solver's own device sort, leaving
        out those with a flag (`flags`, one per held particle; None: keep all); returns how
        many are kept. The grid's drop counters then count the ones left out too: under
        decomposition the run counts its removals itself (`_dropped`)."""
        p = self.particles
        if flags is not None:
            full = np.zeros(p.capacity, np.int32)
            full[: len(flags)] = flags
            p.removed.from_numpy(full)
        kept = self.grid.update(p.position, p.id, p.removed, p.count, p.kind)
        p.reorder(self.grid.order, kept)
        return kept

    # ---------------------------------------------------------------------------- the step

    def _step_batch(
        self,
        remaining: float,
        probe_clock: tuple[float, float],
        until: float | None,
        max_steps: int,
    ) -> None:
        """The batch `Simulation._step_batch` would launch, step by step: as many steps as it
        launches, each as the fused step computes it (solver/distributed/step_phases.py),
        stopping after the step that stops it, so that the host looks at the run (its health,
        the output) after the same steps as with one process. Each step after the first
        exchanges the halo (a step that makes a sort due stops the batch). The probes of a
        step that passes a probe time are sampled by the host after it (a collective,
        solver/distributed/probes.py)."""
        self._sort_if_needed()
        launches = batch_size(max_steps, remaining, self._skin_bound - self.moved, *self._full_step)
        for k in range(launches):
            if k:
                self._sort_if_needed()
                remaining, probe_clock = self._remaining, self._probe_clock
            sampled = len(self.probe_times)
            self._one_step(remaining, probe_clock, until)
            if len(self.probe_times) > sampled:
                self._sample_probes_here()
            if self.batch_halted:
                return

    def _one_step(
        self, remaining: float, probe_clock: tuple[float, float], until: float | None
    ) -> None:
        """One step as step 0 of a batch of one: interaction, combined maxima, update,
        combined health, record (the halo exchanged or the particles sorted before)."""
        p, world = self.particles, self.world
        slots = self._maximum.next_slots(1)
        slot = slots[0]
        lo, hi = self._region
        self._phases.interact(
            p.position, p.ghost, p.velocity, p.density, p.pressure, p.kind, p.removed, p.count,
            self.grid.cell_offsets, p.acceleration, p.density_rate, self._maximum.out, slot,
            self._records, remaining, self.dt, self.moved, *probe_clock, lo, hi, p.density_prev,
            self._lagged_diffusion(), *self._stress_arrays(),
        )  # fmt: skip
        self._combine_maxima(slot)
        self._phases.update(
            p.position, p.velocity, p.velocity_prev, p.density, p.density_prev, p.pressure,
            p.kind, p.removed, p.count, p.acceleration, p.density_rate, self._maximum.out, slot,
            self._euler_at(self.steps), self._health, self._records, lo, hi,
        )  # fmt: skip
        self._health.from_numpy(world.sum(self._health.to_numpy()))
        self._phases.finish(self._maximum.out, slot, self._health, self._records)
        self._count_batch(slots, remaining, until)

    def _sort_if_needed(self, reach: float = 0.0) -> None:
        """Sort when the skin may be used up (`Simulation._sort_if_needed`), else exchange the
        halo: either way the ghosts then hold their owners' current values (at the symplectic
        scheme's mid-step, the predicted ones)."""
        self._sorted_this_step = False
        super()._sort_if_needed(reach)
        if not self._sorted_this_step:
            self._halo.exchange(self.particles)

    def _update_neighbours_and_forces(self, reach: float = 0.0) -> int:
        """The symplectic scheme's interaction (`Simulation._symplectic_step` runs it at the
        start of a step and after the predictor): the one-process kernels after a sort or an
        exchange, with this slab's maxima combined over the job."""
        slot = super()._update_neighbours_and_forces(reach)
        self._combine_maxima(slot)
        return slot

    def _combine_maxima(self, slot: int) -> None:
        """Replace this slab's maxima in `slot` by the job's (an exact MPI maximum)."""
        maxima = self._maximum.out.to_numpy()
        if self.particles.count == 0:  # no particle cleared or filled the slot
            maxima[slot] = -np.inf
        maxima[slot] = self.world.max(maxima[slot])
        self._maximum.out.from_numpy(maxima)

    def _counting_region(self) -> tuple[float, float]:
        return self._region

    def _total_counts(self, counts: np.ndarray) -> np.ndarray:
        return self.world.sum(counts)

    # ------------------------------------------------------------------------ what is seen

    def removed_by_reason(self) -> dict[str, int]:
        """Particles dropped so far in the whole job, by why (a collective)."""
        p = self.particles
        owned = self._origin[: p.count] == self.world.rank if not self._holds_all else None
        flags = p.removed.to_numpy()[: p.count]
        pending = np.bincount(flags[owned] if owned is not None else flags, minlength=3)
        if self._holds_all and self.world.rank != 0:
            pending[:] = 0  # every process holds them all: count them once
        total = self.world.sum(np.concatenate([self._dropped, pending[:3]]).astype(np.int64))
        dropped, pending = total[:DROP_REASONS], total[DROP_REASONS:]
        return {
            "outside_domain": int(dropped[REMOVED_OUTSIDE] + pending[REMOVED_OUTSIDE]),
            "density_out_of_band": int(dropped[REMOVED_DENSITY] + pending[REMOVED_DENSITY]),
        }

    def state(self) -> dict[str, np.ndarray]:
        """The state of the whole job as one process holds it (a collective): on rank 0 the
        particle arrays in global (cell, id) order, whole (capacity long), with the cell
        offsets of the last sort; elsewhere only the scalars."""
        p, world = self.particles, self.world
        dropped = world.sum(self._dropped)
        scalars = self._clock_state()
        if self._holds_all:  # before the first sort: every process holds it all already
            state = super().state() if world.is_root else {}
            return state | scalars if world.is_root else scalars | {"count": np.int64(0)}
        started = wallclock.perf_counter()
        rows = self._download()
        owned = self._origin == world.rank
        parts = world.gather(({k: v[owned] for k, v in rows.items()}, self._keys[owned]))
        if not world.is_root:
            return scalars | {"count": np.int64(0)}
        keys = np.concatenate([part[1] for part in parts])
        order = np.lexsort((np.concatenate([part[0]["id"] for part in parts]), keys))
        state: dict[str, np.ndarray] = {}
        for name in rows:
            values = np.concatenate([part[0][name] for part in parts])[order]
            state[f"particles.{name}"] = whole(values, getattr(p, name))
        state["grid.cell_offsets"] = _cell_offsets(keys, self.grid.num_keys)
        state["grid.dropped"] = dropped.astype(np.int32)
        state["count"] = np.int64(len(keys))
        self.gather_s += wallclock.perf_counter() - started
        return state | scalars

    def keep(self) -> None:
        """Keep the state now (a collective): the job's state gathered on rank 0's host, as
        `state()` gathers it; at an output time whose snapshot gathered it already, that one."""
        if self._gathered is None or self._gathered[:2] != (self.steps, self.time):
            self._gathered = (self.steps, self.time, self.state())

    def kept_state(self) -> dict[str, np.ndarray]:
        """What `state()` returned when `keep` was last called."""
        if self._gathered is None:
            raise RuntimeError("nothing has been kept")
        return self._gathered[2]

    def snapshot_state(self) -> dict[str, np.ndarray]:
        """The whole state (a collective: `state()`), which the next `keep` at the same step
        takes as it is."""
        self._gathered = (self.steps, self.time, self.state())
        return self._gathered[2]

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Continue from `state` (a checkpoint of any number of processes): every process
        reads it whole and keeps its share by the cells of the state's last sort (of the
        particles' positions, if the state's grid has another cell size)."""
        super().restore(state)
        count = int(state["count"])
        offsets = state["grid.cell_offsets"].astype(np.int64)
        if len(offsets) == self.grid.num_keys + 1:
            keys = np.searchsorted(offsets, np.arange(count), side="right") - 1
        else:  # another cell size (see Simulation.restore): the particles' cells now
            lo, inv_cell, dims, _ = self.grid.kernel_args()
            p = self.particles
            cell_keys(p.position, p.kind, count, lo, inv_cell, dims, self._cells)
            keys = self._cells.to_numpy()[:count]
        rows = {name: state[f"particles.{name}"][:count] for name in self._array_names()}
        self._dropped = np.zeros(DROP_REASONS, np.int64)
        if self.world.is_root:
            self._dropped[: len(state["grid.dropped"])] = state["grid.dropped"]
        self.slabs = None
        self._take_share(rows, keys.astype(np.int32), drop=False)
        self._holds_all = False

    def snapshot(self) -> Snapshot:
        """The live particles of the whole job on rank 0 (empty elsewhere; a collective)."""
        state = self.state()
        if not self.world.is_root:
            empty = np.zeros(0, np.int32)
            vectors = np.zeros((0, 3))
            return Snapshot(self.time, self.steps, vectors, vectors, vectors[:, 0],
                            vectors[:, 0], empty, empty)  # fmt: skip
        return snapshot_from_state(state)

    @property
    def exchange_s(self) -> float:
        """Wall time this process spent exchanging: halos every step, migration at sorts."""
        return self._halo.seconds + self.sort_exchange_s

    def decomposition(self) -> dict:
        """The slabs, their loads and the exchange's figures, for summary.json (a collective:
        the ghost and row counts are the job's)."""
        ghosts, sent = self.world.sum(np.array([self._halo.ghosts, self._halo.rows_sent]))
        return {
            "ranks": self.world.size,
            "slab_columns": list(self.slabs.starts) if self.slabs else None,
            "halo_columns": self._halo_columns,
            "rebalances": self.rebalances,
            "imbalance_max": self._imbalance[1],
            "imbalance_mean": self._imbalance[2] / max(self._imbalance[0], 1),
            "gather_s": self.gather_s,
            "ghosts": int(ghosts),
            "halo_rows_sent": int(sent),
        }


def _cell_offsets(keys: np.ndarray, num_keys: int) -> np.ndarray:
    """The cell grid's offsets of particles with keys `keys` (the sort's `cell_offsets`)."""
    counts = np.bincount(keys, minlength=num_keys)[:num_keys]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
