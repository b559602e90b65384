"""Tests of the probes' physics (solver/output/probes.py) on particle fields whose answer is
known: water heights on flat, broken and dry water columns for each gauge definition, and
pressure sensors on the faces of a tank holding water at rest, under mDBC and DBC."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from solver.config import ConfigError, config_to_toml, load_config, loads_config
from solver.output.probes import GAUGE_SURFACES, ProbeSampler
from solver.particle_kind import ParticleKind
from solver.physics.eos import tait_density
from solver.snapshot import Snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
GRAVITY = 9.81
RHO0 = 1000.0
DP = 0.01
KERNELS = ["cubic_spline", "wendland_c2"]


def _lattice(nx: int, ny: int, nz: int, corner: tuple[float, float, float]) -> np.ndarray:
    """Centres of nx x ny x nz cells of size DP, lower corner `corner`: the particles of a
    block of water (or wall) filling exactly that box."""
    i, j, k = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    return (np.stack([i, j, k], axis=-1).reshape(-1, 3) + 0.5) * DP + np.asarray(corner)


def _snapshot(*parts: tuple[np.ndarray, ParticleKind, np.ndarray | float]) -> Snapshot:
    """A snapshot of (positions, kind, pressure) groups; densities follow from the pressures by
    Tait's equation (c0 = 10 m/s), as the solver's equation of state gives them."""
    position = np.concatenate([p for p, _, _ in parts])
    kind = np.concatenate([np.full(len(p), k, np.int32) for p, k, _ in parts])
    pressure = np.concatenate([np.broadcast_to(np.asarray(v, float), len(p)) for p, _, v in parts])
    b = 10.0**2 * RHO0 / 7.0
    n = len(position)
    return Snapshot(
        time=0.0,
        step=0,
        position=position,
        velocity=np.zeros((n, 3)),
        density=tait_density(np.maximum(pressure, 0.0), RHO0, b, 7.0),
        pressure=pressure,
        kind=kind,
        id=np.arange(n, dtype=np.int32),
    )


def _probes(
    heights: dict[str, tuple[float, float, str]], pressures: dict[str, tuple[float, ...]]
) -> SimpleNamespace:
    """Stand-in for config.ProbesConfig with the same attribute names."""
    return SimpleNamespace(
        heights=tuple(
            SimpleNamespace(name=k, x=x, y=y, surface=s) for k, (x, y, s) in heights.items()
        ),
        pressures=tuple(SimpleNamespace(name=k, position=p) for k, p in pressures.items()),
    )


def _sampler(probes: SimpleNamespace, kernel: str, boundary: str = "mdbc") -> ProbeSampler:
    return ProbeSampler(
        probes,
        smoothing_length=math.sqrt(3.0) * DP,
        kernel=kernel,
        particle_mass=RHO0 * DP**3,
        rho0=RHO0,
        z_range=(0.0, 0.5),
        dp=DP,
        boundary=boundary,
    )


def _every_surface(x: float, y: float) -> dict[str, tuple[float, float, str]]:
    """One gauge of each definition on the line (x, y), named after its definition."""
    return {surface: (x, y, surface) for surface in GAUGE_SURFACES}


# --------------------------------------------------------------------------- height gauges


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("layers", [13, 20])
@pytest.mark.parametrize("gap", [0.0, 0.5])
def test_flat_surface_reads_its_height_under_every_definition(
    kernel: str, layers: int, gap: float
) -> None:
    """Water at rest, `layers` dp deep, fills [0, H]: every definition reads H, well within the
    dp/4 sample spacing. With `gap` = dp/2 the water starts dp/2 above the floor (DBC's
    spacing: the first fluid layer dp above the wall layer on the face) and the surface is at
    H + dp/2. Either way the samples next to the floor read (just) dry, the kernel being cut by
    the floor: the wet run must still start at the floor for the wetted length to be H. Wall
    particles under the floor and a lid of obstacle particles above the surface would raise
    the mass sums if the gauges counted them."""
    height = (layers + gap) * DP
    snap = _snapshot(
        (_lattice(12, 12, layers, (0.0, 0.0, gap * DP)), ParticleKind.FLUID, 0.0),
        (_lattice(12, 12, 3, (0.0, 0.0, -3 * DP)), ParticleKind.WALL, 0.0),
        (_lattice(12, 12, 3, (0.0, 0.0, height + 2 * DP)), ParticleKind.OBSTACLE, 0.0),
    )
    for x, y in ((0.06, 0.06), (0.043, 0.071)):
        values = _sampler(_probes(_every_surface(x, y), {}), kernel).sample(snap)
        for surface in GAUGE_SURFACES:
            assert values[surface] == pytest.approx(height, abs=0.1 * DP), (surface, x, y)


@pytest.mark.parametrize("kernel", KERNELS)
def test_column_under_a_detached_blob(kernel: str) -> None:
    """A column 10 dp deep and, 10 dp above it across an air gap, a slab of spray 6 dp thick:
    GaugeSwl stops at the column's top, the highest water is the slab's top, and a wave-probe
    wire is wetted along the column and the slab, 16 dp in all."""
    column, gap, blob = 10 * DP, 10 * DP, 6 * DP
    snap = _snapshot(
        (_lattice(12, 12, 10, (0.0, 0.0, 0.0)), ParticleKind.FLUID, 0.0),
        (_lattice(12, 12, 6, (0.0, 0.0, column + gap)), ParticleKind.FLUID, 0.0),
    )
    values = _sampler(_probes(_every_surface(0.06, 0.06), {}), kernel).sample(snap)
    tolerance = 0.1 * DP
    assert values["first_dry"] == pytest.approx(column, abs=tolerance)
    assert values["highest_wet"] == pytest.approx(column + gap + blob, abs=tolerance)
    assert values["wetted_length"] == pytest.approx(column + blob, abs=2 * tolerance)


def test_dry_line_reads_the_floor() -> None:
    """No water within 2h of the line: every definition reads the floor, z_range[0]."""
    snap = _snapshot((_lattice(12, 12, 10, (0.0, 0.0, 0.0)), ParticleKind.FLUID, 0.0))
    values = _sampler(_probes(_every_surface(0.3, 0.3), {}), "wendland_c2").sample(snap)
    assert values == dict.fromkeys(GAUGE_SURFACES, 0.0)


def test_gauges_on_one_line_share_one_mass_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three gauges at (0.06, 0.06) and one elsewhere: two profiles per sample."""
    snap = _snapshot((_lattice(12, 12, 10, (0.0, 0.0, 0.0)), ParticleKind.FLUID, 0.0))
    heights = _every_surface(0.06, 0.06) | {"other": (0.03, 0.06, "first_dry")}
    sampler = _sampler(_probes(heights, {}), "wendland_c2")
    lines = []
    profile = sampler.mass_profile

    def counted(position: np.ndarray, x: float, y: float) -> np.ndarray:
        lines.append((x, y))
        return profile(position, x, y)

    monkeypatch.setattr(sampler, "mass_profile", counted)
    values = sampler.sample(snap)
    assert sorted(lines) == [(0.03, 0.06), (0.06, 0.06)]
    assert values["other"] == pytest.approx(values["first_dry"], abs=0.3 * DP)


def test_probe_names_heights_first_in_config_order() -> None:
    probes = _probes(
        {"H2": (0, 0, "first_dry"), "H1": (1, 0, "wetted_length"), "H0": (0, 0, "highest_wet")},
        {"P9": (0, 0, 0), "P1": (0, 0, 1)},
    )
    sampler = _sampler(probes, "wendland_c2")
    assert sampler.names == ["H2", "H1", "H0", "P9", "P1"]
    snap = _snapshot((_lattice(12, 12, 5, (0.0, 0.0, 0.0)), ParticleKind.FLUID, 0.0))
    assert list(sampler.sample(snap)) == sampler.names


# --------------------------------------------------------------------------- pressure sensors

#: Water at rest in the corner of a tank: fluid in x in [0, 16 dp], y in [0, 12 dp], z in [0, H];
#: three layers of wall under the floor z = 0 and behind the side wall x = 0 (to 6 dp above the
#: water), the innermost dp/2 behind the face, as mDBC places them.
DEPTH = 20 * DP


def _hydrostatic(z: np.ndarray) -> np.ndarray:
    """rho0 g (H - z), and 0 above the water."""
    return np.maximum(RHO0 * GRAVITY * (DEPTH - z), 0.0)


def _tank_corner(wall_pressure: str | float) -> tuple[Snapshot, Snapshot]:
    """The corner with the wall particles carrying `wall_pressure` ("extrapolated": the
    hydrostatic field continued linearly across the faces and clamped at 0, what mDBC gives
    them; a number: that pressure everywhere), and the same water without any wall."""
    fluid = _lattice(16, 12, 20, (0.0, 0.0, 0.0))
    floor = _lattice(19, 12, 3, (-3 * DP, 0.0, -3 * DP))
    side = _lattice(3, 12, 26, (-3 * DP, 0.0, 0.0))
    wall = np.concatenate([floor, side])
    value = _hydrostatic(wall[:, 2]) if wall_pressure == "extrapolated" else wall_pressure
    water = (fluid, ParticleKind.FLUID, _hydrostatic(fluid[:, 2]))
    return _snapshot(water, (wall, ParticleKind.WALL, value)), _snapshot(water)


#: Sensors on the faces, in the middle of the tank's width: on the floor, on the side wall at
#: three depths, and on the side wall above the water.
FACE_SENSORS = {
    "floor": (0.08, 0.06, 0.0),
    "wall_deep": (0.0, 0.06, 0.03),
    "wall_mid": (0.0, 0.06, 0.1),
    "wall_high": (0.0, 0.06, 0.17),
}


@pytest.mark.parametrize("kernel", KERNELS)
def test_mdbc_sensor_on_a_face_reads_the_hydrostatic_pressure(kernel: str) -> None:
    """Under mDBC the wall particles continue the fluid's pressure field across the face, so
    the Shepard average at a point on the face (floor or side wall) is rho0 g depth."""
    snap, _ = _tank_corner("extrapolated")
    values = _sampler(_probes({}, FACE_SENSORS), kernel, "mdbc").sample(snap)
    for name, point in FACE_SENSORS.items():
        expected = RHO0 * GRAVITY * (DEPTH - point[2])
        assert values[name] == pytest.approx(expected, rel=0.02), name


@pytest.mark.parametrize("kernel", KERNELS)
def test_dbc_sensor_averages_the_fluid_alone(kernel: str) -> None:
    """Under DBC the wall particles' pressure is not the fluid's field (here 1e9 Pa): the
    sensors read exactly what the water alone gives. On the floor that is the average over the
    water's half of the support, whose centroid lies above the face: it reads low, where the
    mDBC rule reads the face pressure."""
    snap, water_only = _tank_corner(1e9)
    sampler = _sampler(_probes({}, FACE_SENSORS), kernel, "dbc")
    values = sampler.sample(snap)
    assert values == sampler.sample(water_only)
    on_floor = RHO0 * GRAVITY * DEPTH
    assert 0.9 * on_floor < values["floor"] < 0.99 * on_floor
    mdbc, _ = _tank_corner("extrapolated")
    mdbc_floor = _sampler(_probes({}, FACE_SENSORS), kernel, "mdbc").sample(mdbc)["floor"]
    assert abs(mdbc_floor - on_floor) < abs(values["floor"] - on_floor)


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_dry_sensor_reads_zero_next_to_loaded_walls(boundary: str) -> None:
    """A sensor on the side wall above the water, with no fluid within 2h but wall particles
    around it carrying 5 kPa, reads 0: the wall alone is not a measurement."""
    snap, _ = _tank_corner(5000.0)
    dry = {"dry": (0.0, 0.06, DEPTH + 4 * DP), "wet": FACE_SENSORS["wall_mid"]}
    values = _sampler(_probes({}, dry), "wendland_c2", boundary).sample(snap)
    assert values["dry"] == 0.0
    assert values["wet"] > 0.0


def test_sampler_refuses_unknown_boundary_and_surface() -> None:
    with pytest.raises(ValueError, match="boundary"):
        _sampler(_probes({}, {}), "wendland_c2", "ghost")
    with pytest.raises(ValueError, match="surface"):
        _sampler(_probes({"H": (0.0, 0.0, "lowest")}, {}), "wendland_c2")


# --------------------------------------------------------------------------- configuration

CASE = """
[particles]
dp = 0.05
[tank]
min = [0.0, 0.0, 0.0]
max = [1.0, 0.5, 0.6]
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.5, 0.3]
"""


def test_gauge_surface_key_defaults_round_trips_and_is_checked() -> None:
    cfg = loads_config(
        CASE
        + "[[probes.height]]\nname = 'H1'\nx = 0.5\ny = 0.25\n"
        + "[[probes.height]]\nname = 'H1_swl'\nx = 0.5\ny = 0.25\nsurface = 'first_dry'\n",
        source="case.toml",
    )
    assert [g.surface for g in cfg.probes.heights] == ["wetted_length", "first_dry"]
    assert loads_config(config_to_toml(cfg)) == cfg
    bad = CASE + "[[probes.height]]\nname = 'H1'\nx = 0.5\ny = 0.25\nsurface = 'top'\n"
    with pytest.raises(ConfigError, match=r"probes\.height\[0\]\.surface.*wetted_length"):
        loads_config(bad, source="case.toml")


def test_spheric_case_reads_each_gauge_three_ways() -> None:
    """H1..H4 (wetted length, as the experiment), Hn_swl (GaugeSwl) and Hn_top (highest
    water) stand on the same four lines, sampled every millisecond over the benchmark's 6 s."""
    cfg = load_config(REPO_ROOT / "configs" / "spheric_test2.toml", [])
    gauges = {g.name: g for g in cfg.probes.heights}
    for n in range(1, 5):
        base, swl, top = gauges[f"H{n}"], gauges[f"H{n}_swl"], gauges[f"H{n}_top"]
        assert (base.surface, swl.surface, top.surface) == GAUGE_SURFACES
        assert (base.x, base.y) == (swl.x, swl.y) == (top.x, top.y)
    assert len(gauges) == 12
    assert cfg.time.end == 6.0 and cfg.probe_interval == 0.001
