"""The fitted fluid lattice (`particles.fluid_lattice = "fitted"`, solver/lattice.py): a block
whose size is not a whole number of dp is built with exactly its size and its mass, and the
water built that way stands at the block's depth.

On the dp lattice SPHERIC test 2's 0.55 m reservoir (27.5 dp at dp = 0.02) is built 0.56 m
deep; the fitted lattice puts 28 layers of 0.55 / 28 m in it, each particle of mass rho0 times
its cell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import use_backend

from solver.config import ConfigError, config_to_toml, loads_config
from solver.output.probes import ProbeSampler
from solver.particle_kind import ParticleKind
from solver.scene import build_scene, lattice_mismatches, particle_count_bound
from solver.simulation import Simulation

FLUID = int(ParticleKind.FLUID)
BLOCK_MIN = (0.222, 0.0, 0.0)
BLOCK_MAX = (0.6, 0.2, 0.23)
CASE = f"""
[particles]
dp = 0.04
fluid_lattice = "fitted"
[tank]
min = [0.0, 0.0, 0.0]
max = [0.6, 0.2, 0.4]
[[fluid]]
min = {list(BLOCK_MIN)}
max = {list(BLOCK_MAX)}
[[obstacle]]
min = [0.05, 0.05, 0.0]
max = [0.13, 0.15, 0.08]
[physics]
boundary = "mdbc"
"""
"""A reservoir of 9.45 x 5 x 5.75 dp beside a box: 9 x 5 x 6 fitted layers."""
SECOND_BLOCK = "[[fluid]]\nmin = [0.0, 0.0, 0.3]\nmax = [0.1, 0.2, 0.4]"


def test_the_fitted_block_is_built_with_its_size_and_its_mass() -> None:
    cfg = loads_config(CASE)
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    counts = (9, 5, 6)
    assert len(fluid) == math.prod(counts)
    assert particle_count_bound(cfg) == len(scene.kind)
    for a in range(3):
        spacing = (BLOCK_MAX[a] - BLOCK_MIN[a]) / counts[a]
        assert cfg.fluid_cell[a] == pytest.approx(spacing, rel=1e-12)
        assert fluid[:, a].min() == pytest.approx(BLOCK_MIN[a] + spacing / 2, abs=1e-12)
        assert fluid[:, a].max() == pytest.approx(BLOCK_MAX[a] - spacing / 2, abs=1e-12)
        assert len(np.unique(np.round(fluid[:, a], 9))) == counts[a]
    volume = math.prod(hi - lo for lo, hi in zip(BLOCK_MIN, BLOCK_MAX, strict=True))
    assert len(fluid) * cfg.particle_mass == pytest.approx(cfg.physics.rho0 * volume, rel=1e-12)
    assert cfg.boundary_particle_mass == pytest.approx(cfg.physics.rho0 * cfg.dp**3, rel=1e-12)
    assert lattice_mismatches(cfg) == []


def test_under_dbc_the_fitted_block_keeps_dp_2_from_the_wall_layers() -> None:
    """DBC's wall layers lie on the tank faces and its water keeps dp/2 from them, so the block
    is cut to [tank + dp/2, tank - dp/2] where it reaches a face: x [0.222, 0.58] (9 layers),
    y [0.02, 0.18] (4), z [0.02, 0.23] (5)."""
    cfg = loads_config(CASE.replace('boundary = "mdbc"', 'boundary = "dbc"'))
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    low, high, counts = (0.222, 0.02, 0.02), (0.58, 0.18, 0.23), (9, 4, 5)
    assert len(fluid) == math.prod(counts)
    assert particle_count_bound(cfg) >= len(scene.kind)  # DBC drops obstacle points on walls
    for a in range(3):
        spacing = (high[a] - low[a]) / counts[a]
        assert fluid[:, a].min() == pytest.approx(low[a] + spacing / 2, abs=1e-12)
        assert fluid[:, a].max() == pytest.approx(high[a] - spacing / 2, abs=1e-12)
    volume = math.prod(h - lo for lo, h in zip(low, high, strict=True))
    assert len(fluid) * cfg.particle_mass == pytest.approx(cfg.physics.rho0 * volume, rel=1e-12)


def test_the_dp_lattice_builds_the_same_block_half_a_layer_off() -> None:
    """The same block on the dp lattice: the notes name both axes it cannot fill (x: 0.378 m
    is 9.45 dp; z: 0.23 m is 5.75 dp, built 0.24 m deep), and its particles weigh rho0 dp^3."""
    cfg = loads_config(CASE.replace('fluid_lattice = "fitted"', 'fluid_lattice = "dp"'))
    notes = lattice_mismatches(cfg)
    assert [note.split(" along ")[1][0] for note in notes] == ["x", "z"]
    scene = build_scene(cfg)
    assert scene.position[scene.kind == FLUID, 2].max() == pytest.approx(0.22)  # 0.24 deep
    assert cfg.particle_mass == cfg.boundary_particle_mass


def test_the_choice_survives_the_resolved_config() -> None:
    cfg = loads_config(CASE)
    again = loads_config(config_to_toml(cfg))
    assert again == cfg and again.fluid_lattice == "fitted"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("[[obstacle]]", f"{SECOND_BLOCK}\n[[obstacle]]"),
            "needs exactly one [[fluid]] block, not 2",
        ),
        (
            ("max = [0.6, 0.2, 0.23]", "max = [0.6, 0.2, 0.015]"),
            "holds less than dp/2 = 0.02 m of water on z",
        ),
    ],
)
def test_a_fitted_lattice_it_cannot_build_is_refused(change: tuple[str, str], message: str) -> None:
    """The error names the file and the key, says what is needed, and offers "dp"."""
    with pytest.raises(ConfigError) as error:
        loads_config(CASE.replace(*change), source="reservoir.toml")
    text = str(error.value)
    assert "reservoir.toml" in text and message in text, text
    assert "particles.fluid_lattice" in text


STILL = """
[particles]
dp = 0.02
fluid_lattice = "fitted"
[tank]
min = [0.0, 0.0, 0.0]
max = [0.24, 0.12, 0.4]
open_top = false
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.24, 0.12, 0.29]
[physics]
kernel = "wendland_c2"
boundary = "mdbc"
[time]
end = 1.0
[[probes.pressure]]
name = "floor_centre"
position = [0.12, 0.06, 0.0]
reading = "face"
"""
DEPTH = 0.29
"""14.5 dp: 15 fitted layers of 0.29 / 15 m; the dp lattice builds it 0.30 m deep."""


def test_fitted_still_water_stands_at_the_block_depth() -> None:
    """Still water built 14.5 dp deep on the fitted lattice keeps its mass and its depth: after
    0.75 s on the CPU the floor reads rho0 |g| h for h = 0.29 m within 3 %, averaged over the
    last 0.25 s (measured +1.6 %: the SPH free surface adds about 0.3 dp of head, see
    test_still_water_mdbc.py; the same water on the dp lattice, 0.30 m deep, reads +5.4 %),
    its top stays within dp/4 of 0.29 m, and nothing is removed."""
    use_backend("cpu")
    cfg = loads_config(STILL)
    sim = Simulation(cfg)
    sampler = ProbeSampler.for_case(cfg)
    readings = []
    end = 0.75
    while sim.time < end:
        sim.step(dt_limit=end - sim.time)
        if sim.time >= end - 0.25 and sim.steps % 5 == 0:
            readings.append(sampler.sample(sim.snapshot())["floor_centre"])
    expected = cfg.physics.rho0 * cfg.gravity_magnitude * DEPTH
    assert abs(np.mean(readings) / expected - 1.0) < 0.03, (np.mean(readings), expected)
    snap = sim.snapshot()
    top = snap.position[snap.kind == FLUID, 2].max() + 0.5 * cfg.fluid_cell[2]
    assert abs(top - DEPTH) < 0.25 * cfg.dp, top
    assert sim.removed == 0
