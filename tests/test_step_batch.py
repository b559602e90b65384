"""Batches of Verlet steps launched without a read-back between them (Simulation.advance,
solver/step_batch.py): they land on their target time, they sort on the device where the skin
is used up (solver/batch_sort.py), they stop where the host is needed (a sort that drops
particles, a non-finite value) and the later kernels of a stopped batch change nothing.

The determinism rule: within one target time, the result does not depend on how the steps are
split into batches, bit for bit (the device's count of the time left goes on from batch to
batch). Against single steps each limited by the host (`step(until - time)`, the limit
rounded afresh from the host's f64 time at every step), only the steps that land on a target
differ, by float32 rounding of the time left, so those runs agree to rounding.
"""

import math
from pathlib import Path

import numpy as np
import pytest
import taichi as ti

from solver.config import load_config
from solver.health import HealthCheck, HealthLimits, NumericalFailureError
from solver.neighbors import CellGrid, count_neighbours
from solver.particle_kind import ParticleKind
from solver.phase_timer import PhaseTimer
from solver.simulation import Simulation
from solver.step_batch import MAX_STEPS

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quick.toml"
SKIN = ["neighbors.skin=0.1", "neighbors.lists=false"]  # the batch sorts: without lists


def run_to(sim: Simulation, until: float, max_steps: int = 64) -> int:
    """advance() toward `until` until it lands; returns the calls it took."""
    calls = 0
    while sim.time < until:
        sim.advance(until, max_steps)
        calls += 1
    return calls


def by_id(sim: Simulation, name: str) -> np.ndarray:
    p = sim.particles
    order = np.argsort(p.id.to_numpy()[: p.count])
    return getattr(p, name).to_numpy()[: p.count][order]


def test_advance_lands_on_its_targets_whatever_the_batch_size(on_backend: str) -> None:
    """Three output times 0.01 s apart (about 25 steps each): advance() in batches of up to 64
    steps and in batches of one step land exactly on each, with identical states, bit for
    bit; single host-limited steps take the same steps and sorts to the same times and agree
    to 1e-5 dp in position and 1e-5 in relative density."""
    cfg = load_config(QUICK, SKIN)
    batched, single, stepped = Simulation(cfg), Simulation(cfg), Simulation(cfg)
    calls = 0
    for until in (0.01, 0.02, 0.03):
        calls += run_to(batched, until)
        run_to(single, until, max_steps=1)
        while stepped.time < until:
            stepped.step(until - stepped.time)
        assert batched.time == single.time == until
        assert stepped.time == pytest.approx(until, rel=1e-12, abs=0.0)
        assert batched.steps == single.steps == stepped.steps
        assert batched.sorts == single.sorts == stepped.sorts
    assert batched.steps >= 70 and calls <= 8  # batches, not steps
    got, expected = batched.state(), single.state()
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name
    shift = np.abs(by_id(batched, "position") - by_id(stepped, "position")).max()
    assert shift < 1e-5 * cfg.dp
    np.testing.assert_allclose(by_id(batched, "density"), by_id(stepped, "density"), rtol=1e-5)


def test_a_batch_asked_for_more_steps_than_its_records_takes_max_steps(on_cpu: str) -> None:
    """advance() asked for more steps than a batch has record rows (`dambreak bench` asks for
    all its timed steps at once) takes MAX_STEPS at most and counts every step it took: the
    state after 100 steps asked for 200 at a time is bitwise that of batches of 64."""
    cfg = load_config(QUICK, SKIN)
    states = []
    for asked in (200, MAX_STEPS):
        sim = Simulation(cfg)
        while sim.steps < 100:
            before = sim.steps
            sim.advance(math.inf, min(asked, 100 - sim.steps))
            assert sim.steps - before <= MAX_STEPS
        states.append((sim.steps, sim.time, sim.sorts, by_id(sim, "position")))
    (steps_a, time_a, sorts_a, x_a), (steps_b, time_b, sorts_b, x_b) = states
    assert steps_a == steps_b == 100
    assert (time_a, sorts_a) == (time_b, sorts_b)
    assert np.array_equal(x_a, x_b)


def test_compiling_the_batch_sort_changes_nothing(on_cpu: str) -> None:
    """Simulation.compile_batch_sort (which `dambreak bench` calls before its timed steps)
    launches the queued sort's kernels on a halted batch's control row: the run after it is
    bitwise the run without it, sorts included."""
    cfg = load_config(QUICK, SKIN)
    runs = []
    for compile_first in (False, True):
        sim = Simulation(cfg)
        for _ in range(20):
            sim.step()
        if compile_first:
            sim.compile_batch_sort()
        run_to(sim, 0.06)
        runs.append((sim.steps, sim.sorts, by_id(sim, "position"), by_id(sim, "density")))
    (steps_a, sorts_a, x_a, rho_a), (steps_b, sorts_b, x_b, rho_b) = runs
    assert (steps_a, sorts_a) == (steps_b, sorts_b) and sorts_a >= 2
    assert np.array_equal(x_a, x_b) and np.array_equal(rho_a, rho_b)


def test_batches_carry_the_sps_stress(on_cpu: str) -> None:
    """Under laminar_sps each step reads the stress tau the step before wrote into tau_next:
    the launches of a batch alternate the two arrays, and the host swaps them once for each
    odd number of steps taken. Batched and one-step batches give the same bits, tau too."""
    cfg = load_config(QUICK, [*SKIN, "physics.viscosity=laminar_sps"])
    batched, single = Simulation(cfg), Simulation(cfg)
    for until in (0.01, 0.02):
        run_to(batched, until)
        run_to(single, until, max_steps=1)
    got, expected = batched.state(), single.state()
    assert np.any(got["particles.tau"] != 0.0)
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name


def _neighbour_counts(
    position: ti.Ndarray,
    removed: ti.Ndarray,
    n: int,
    radius: float,
    grid: CellGrid,
    search_radius: float,
) -> np.ndarray:
    """Live particles within `radius` of each of the first n, searched within `search_radius`
    over `grid`'s cells (in whose order the particles must be stored)."""
    counts = ti.ndarray(ti.f32, shape=n)
    lo, inv_cell, dims, offsets = grid.kernel_args()
    count_neighbours(
        position, removed, n, radius, search_radius, lo, inv_cell, dims, offsets, counts
    )
    return counts.to_numpy()


def stale_and_fresh_counts(sim: Simulation, fresh: CellGrid) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours within the support of every particle, by id: searched as the interaction
    searches (the last sort's cells, the skin's radius), and over `fresh`, a grid sorted now
    (the particles copied into its order)."""
    p, radius = sim.particles, sim.cfg.support_radius
    ids = p.id.to_numpy()[: p.count]
    stale = _neighbour_counts(
        p.position, p.removed, p.count, radius, sim.grid, radius * (1.0 + sim.skin)
    )
    kept = fresh.update(p.position, p.id, p.removed, p.count)
    order = fresh.order.to_numpy()[:kept]
    position = ti.Vector.ndarray(3, ti.f32, shape=kept)
    position.from_numpy(p.position.to_numpy()[order])
    removed = ti.ndarray(ti.i32, shape=kept)
    removed.fill(0)
    now = _neighbour_counts(position, removed, kept, radius, fresh, radius)
    live = p.removed.to_numpy()[: p.count] == 0
    return stale[live][np.argsort(ids[live])], now[np.argsort(ids[order])]


def test_the_batch_sorts_on_the_device_where_the_skin_is_used_up(on_cpu: str) -> None:
    """The dam break with a skin of 0.1 to 0.15 s, outputs every 0.01 s: the sorts queued
    between a batch's steps (solver/batch_sort.py) take the sorts due there, so batches run
    on to their targets, where the host-sorted batches (no queued sorts) stopped at every
    sort due; both give the same steps, sorts and state, bit for bit. At every batch end
    with skin left, the search over the last sort's cells finds exactly the neighbours a
    fresh grid finds. The run takes the sorts and steps of the host-driven run (separate
    kernels, the host keeping the skin's books) and agrees with it to 1e-4 of the scale."""
    cfg = load_config(QUICK, SKIN)
    sim, host_sorted, host = Simulation(cfg), Simulation(cfg), Simulation(cfg)
    host_sorted._batch_sort = None
    host.phase = PhaseTimer()
    bound = sim._skin_bound
    fresh = CellGrid(cfg.domain.min, cfg.domain.max, cfg.support_radius, sim.count)
    batches = host_batches = sorted_in_batch = checked = 0
    for k in range(1, 16):
        until = k * 0.01
        while sim.time < until:
            sorts, due = sim.sorts, sim.moved > bound
            sim.advance(until)
            batches += 1
            sorted_in_batch += sim.sorts - sorts - int(due)
            if sim.moved <= bound:
                np.testing.assert_array_equal(*stale_and_fresh_counts(sim, fresh))
                checked += 1
        assert sim.landed and sim.time == until
        host_batches += run_to(host_sorted, until)
        while host.time < until:
            host.step(until - host.time)
    assert sorted_in_batch >= 5 and checked >= 10
    assert batches < host_batches - 5
    assert sim.sorts == host_sorted.sorts == host.sorts >= 6
    assert sim.steps == host_sorted.steps == host.steps
    got, expected = sim.state(), host_sorted.state()
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name
    for name in ("position", "velocity", "density"):
        a, b = by_id(sim, name), by_id(host, name)
        assert np.abs(a - b).max() <= 1e-4 * np.abs(b).max(), name


def test_a_sort_due_with_particles_flagged_stops_the_batch_for_the_host(on_cpu: str) -> None:
    """A fluid particle put outside the domain is flagged for removal by the next step; the
    batch's own sorts then leave the sort to the host, which logs the particle before the
    sort drops it: the run removes it once, logs it where the host-sorted run does, and
    their states are the same, bit for bit."""
    cfg = load_config(QUICK, SKIN)
    sim, host_sorted = Simulation(cfg), Simulation(cfg)
    host_sorted._batch_sort = None
    for run in (sim, host_sorted):
        run_to(run, 0.02)
        p = run.particles
        ids, kind = p.id.to_numpy()[: p.count], p.kind.to_numpy()[: p.count]
        index = np.flatnonzero((ids >= 500) & (kind == ParticleKind.FLUID))[0]
        position = p.position.to_numpy()
        position[index] = np.asarray(cfg.domain.max) + 1.0
        p.position.from_numpy(position)
        for until in (0.03, 0.04, 0.05):
            run_to(run, until)
    assert sim.removed_by_reason() == {"outside_domain": 1, "density_out_of_band": 0}
    assert len(sim.removal_log) == 1
    assert sim.removal_log.rows().tobytes() == host_sorted.removal_log.rows().tobytes()
    assert sim.sorts == host_sorted.sorts
    got, expected = sim.state(), host_sorted.state()
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name


def _plant_nan_at_launch(sim: Simulation, at: int) -> list[int]:
    """Make `sim` put a NaN into a fluid particle's velocity just before launching kernel
    `at` of its next batch (between launches, as nothing on the host could); returns the list
    of launch numbers seen, filled as the batch launches."""
    launches: list[int] = []
    launch = sim._launch_step

    def launch_with_nan(
        k: int, slot: int, remaining: float, probe_clock: tuple, sort_follows: bool
    ) -> None:
        if k == at and len(launches) == at:  # in the first batch only
            p = sim.particles
            fluid = np.flatnonzero(p.kind.to_numpy()[: p.count] == ParticleKind.FLUID)
            velocity = p.velocity.to_numpy()
            velocity[fluid[5]] = np.nan
            p.velocity.from_numpy(velocity)
        launches.append(k)
        launch(k, slot, remaining, probe_clock, sort_follows)

    sim._launch_step = launch_with_nan
    return launches


def test_a_nan_mid_batch_stops_it_at_that_step(on_backend: str) -> None:
    """A NaN appearing before the 4th kernel of a batch of about 25: the device stops the
    batch at that step (the host counts 4 steps), the kernels launched after it change
    nothing (the state equals that of a batch of exactly 4 launches, bit for bit), and the
    health check names the step."""
    cfg = load_config(QUICK, SKIN)
    full, short = Simulation(cfg), Simulation(cfg)
    for sim in (full, short):
        sim.advance(0.01)  # one step: the next batch knows the step size
    start = full.steps
    launches = _plant_nan_at_launch(full, 3)
    full.advance(0.01)
    assert len(launches) > 4, "the batch should have launched beyond the NaN"
    assert full.steps == start + 4 and full.nonfinite >= 1
    _plant_nan_at_launch(short, 3)
    short.advance(0.01, max_steps=4)
    got, expected = full.state(), short.state()
    for name in expected:
        assert got[name].tobytes() == expected[name].tobytes(), name
    health = HealthCheck(full, HealthLimits(cfg.time.dt_min, cfg.physics.max_removed))
    with pytest.raises(NumericalFailureError, match=rf"non-finite values .* at step {start + 4},"):
        health.check()


def test_the_time_step_floor_mid_batch_stops_it_at_that_step(on_cpu: str) -> None:
    """time.dt_min = 0.4025 ms, just under the quick case's first CFL steps (0.4039 ms, then
    falling): a batch stops at the first step pushed down to the floor (the 8th), the step
    one-step batches find too, and the health check names it."""
    cfg = load_config(QUICK, [*SKIN, "time.dt_min=4.025e-4"])
    batched, single = Simulation(cfg), Simulation(cfg)
    calls = 0
    while not batched.at_dt_floor and batched.time < 0.01:
        batched.advance(0.01)
        calls += 1
    while not single.at_dt_floor and single.time < 0.01:
        single.advance(0.01, max_steps=1)
    assert batched.at_dt_floor and single.at_dt_floor
    assert batched.steps == single.steps == 8 and calls == 2
    assert batched.dt == pytest.approx(cfg.time.dt_min, rel=1e-6)
    health = HealthCheck(batched, HealthLimits(cfg.time.dt_min, cfg.physics.max_removed))
    with pytest.raises(NumericalFailureError, match=r"at its floor .* at step 8,"):
        health.check()
