"""The CPU's neighbour lists (solver/neighbor_lists.py) against the cell walk they replace."""

from pathlib import Path

import numpy as np
import pytest

from solver.config import load_config
from solver.neighbor_lists import HEADER, LIST_SKIN
from solver.particle_kind import ParticleKind
from solver.simulation import Simulation

QUICK = Path(__file__).resolve().parents[1] / "configs" / "quick.toml"
STATE = ("position", "velocity", "density", "pressure")


def run(settings: list[str], until: float) -> tuple[Simulation, dict[str, np.ndarray]]:
    """The quick case advanced to `until` with `settings`, and its state."""
    sim = Simulation(load_config(QUICK, ["particles.dp=0.04", *settings]))
    while sim.time < until:
        sim.advance(until)
    p = sim.particles
    n = p.count
    return sim, {name: getattr(p, name).to_numpy()[:n] for name in STATE}


@pytest.mark.parametrize(
    "boundary, integrator", [("mdbc", "verlet"), ("dbc", "verlet"), ("mdbc", "symplectic")]
)
def test_lists_give_the_walks_bits(on_cpu_strict: str, boundary: str, integrator: str) -> None:
    """With the same skin, so the same sorts, reading the lists adds the walk's terms in the
    walk's order: the state after 0.2 s of the collapse (several list builds, particles
    moving) is the same bits, in the pair halves and in the mDBC pass. Without fast math
    (conftest.on_cpu_strict): with it, an AMD EPYC's compiler fused the two loops' multiplies
    and adds differently, and the states parted by 1e-6 m."""
    settings = [
        f"physics.boundary={boundary}",
        f"time.integrator={integrator}",
        f"neighbors.skin={LIST_SKIN}",
    ]
    listed, state = run([*settings, "neighbors.lists=true"], 0.2)
    walked, walk_state = run([*settings, "neighbors.lists=false"], 0.2)
    assert listed._lists is not None and walked._lists is None
    assert listed.steps == walked.steps and listed.sorts == walked.sorts > 3
    for name in STATE:
        assert np.array_equal(state[name], walk_state[name]), name


def test_lists_are_the_cpu_default_with_a_skin(on_cpu: str) -> None:
    """The CPU's pair halves read lists by default, with LIST_SKIN; a zero skin (a sort every
    step) or the gather walks."""
    cfg = load_config(QUICK, ["particles.dp=0.06"])
    sim = Simulation(cfg)
    assert sim._lists is not None and sim.skin == LIST_SKIN
    assert Simulation(load_config(QUICK, ["particles.dp=0.06", "neighbors.skin=0"]))._lists is None
    gather = load_config(QUICK, ["particles.dp=0.06", "neighbors.pair_halves=false"])
    gathered = Simulation(gather)
    assert gathered._lists is None and gathered.skin == 0.0


def test_rows_widen_to_the_longest_list(on_cpu: str) -> None:
    """A list longer than the rows hold widens them and is built again whole: every fluid
    particle's list holds each fluid particle above it in the sort and each boundary
    particle within the list radius, as a brute-force count finds them."""
    cfg = load_config(QUICK, ["particles.dp=0.04"])
    sim = Simulation(cfg)
    sim.ensure_sorted()
    lists = sim._lists.lists.to_numpy()
    assert sim._lists.width >= lists[:, 0].max() > 64  # wider than FIRST_WIDTH
    p = sim.particles
    n = p.count
    x = p.position.to_numpy()[:n].astype(np.float64)
    kind = p.kind.to_numpy()[:n]
    radius = cfg.support_radius * (1.0 + 2.0 * sim.skin)
    for i in np.flatnonzero(kind == ParticleKind.FLUID)[::37]:
        near = np.flatnonzero(np.sum((x - x[i]) ** 2, axis=1) < radius**2 * (1 - 1e-5))
        wanted = set(near[(near > i) | (kind[near] != ParticleKind.FLUID)])
        listed = lists[i, HEADER : HEADER + lists[i, 0]]
        assert wanted <= set(listed)
        fluid = lists[i, 1]  # the fluid candidates first, rising, then the boundary's
        assert np.all(kind[listed[:fluid]] == ParticleKind.FLUID)
        assert np.all(kind[listed[fluid:]] != ParticleKind.FLUID)
