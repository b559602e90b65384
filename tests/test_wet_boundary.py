"""The mDBC pass's work list (solver/physics/wet_boundary.py): after a sort it lists, in order,
every boundary particle with fluid within the search radius of its ghost node, leaves the others
at rho0, and a run over it gives the bits of a run over the whole boundary block."""

from pathlib import Path

import numpy as np

from solver.config import load_config
from solver.particle_kind import ParticleKind
from solver.physics.eos import tait_pressure
from solver.physics.mdbc import in_reach
from solver.simulation import Simulation

QUICK = Path(__file__).resolve().parents[1] / "configs" / "quick.toml"
FLUID = int(ParticleKind.FLUID)


class WholeBlockSimulation(Simulation):
    """A simulation whose mDBC pass runs over the whole boundary block, as before the list."""

    keeps_wet_list = False


def test_list_holds_every_boundary_particle_near_the_fluid(on_backend: str) -> None:
    """On the quick case after its surge reached the obstacle: the list is strictly increasing
    within the boundary block; every boundary particle within the fluid's reach with a fluid
    particle closer to its ghost node than the search radius (the support plus the skin) is
    listed, and every particle left out holds rho0 and its pressure."""
    cfg = load_config(QUICK)
    sim = Simulation(cfg)
    sim.advance(0.25)
    sim._sort()  # the list as a sort leaves it, for the positions now
    p = sim.particles
    n = p.count
    wet = sim._wet_list.to_numpy()
    listed = wet[1 : 1 + wet[0]]
    kind = p.kind.to_numpy()[:n]
    position = p.position.to_numpy()[:n].astype(np.float64)
    ghost = p.ghost.to_numpy()[:n].astype(np.float64)
    first = int(np.count_nonzero(kind == FLUID))
    assert (kind[first:] != FLUID).all()  # the sort files the fluid first
    assert len(listed) > 0 and (np.diff(listed) > 0).all()
    assert listed[0] >= first and listed[-1] < n

    boundary = np.arange(first, n)
    node = position[boundary] + ghost[boundary]
    radius = cfg.support_radius * (1.0 + sim.skin)
    fluid = position[:first]
    near = np.zeros(len(boundary), bool)
    for start in range(0, len(boundary), 512):
        d2 = ((node[start : start + 512, None, :] - fluid[None, :, :]) ** 2).sum(-1)
        near[start : start + 512] = (d2 < radius**2).any(axis=1)
    near &= in_reach(ghost[boundary], cfg.support_radius)
    assert near.any() and not near.all()
    is_listed = np.isin(boundary, listed)
    assert is_listed[near].all()

    rho0 = cfg.physics.rho0
    rest_pressure = tait_pressure(np.float32(rho0), rho0, cfg.eos_b, cfg.physics.gamma)
    left_out = boundary[~is_listed]
    assert (p.density.to_numpy()[left_out] == np.float32(rho0)).all()
    assert np.allclose(p.pressure.to_numpy()[left_out], rest_pressure, atol=1e-6)


def _same_bits_with_and_without_list(overrides: list[str]) -> None:
    """The quick case over 0.1 s (its surge reaching the obstacle) with `overrides`: the state
    with the list is bit for bit the state of the pass over the whole boundary block."""
    cfg = load_config(QUICK, ["time.end=0.1", *overrides])
    states = []
    for simulation in (Simulation, WholeBlockSimulation):
        sim = simulation(cfg)
        while sim.time < cfg.time.end:
            sim.advance(cfg.time.end)
        assert sim.sorts > 2
        states.append(sim.state())
    with_list, whole_block = states
    for name, values in whole_block.items():
        assert np.array_equal(with_list[name], values, equal_nan=True), name


def test_run_over_the_list_gives_the_whole_blocks_bits(on_backend: str) -> None:
    """Walking the cells with the GPUs' skin, the sorts queued inside batches of steps (the
    GPUs' way; on the CPU without its neighbour lists)."""
    _same_bits_with_and_without_list(["neighbors.lists=false", "neighbors.skin=0.1"])


def test_run_over_the_list_gives_the_whole_blocks_bits_with_neighbour_lists(on_cpu: str) -> None:
    """With the CPU's neighbour lists, built at the host's sorts."""
    _same_bits_with_and_without_list([])
