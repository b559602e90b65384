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
    heights: dict[str, tuple[float, float, str]],
    pressures: dict[str, tuple[float, ...]],
    reading: str = "face",
) -> SimpleNamespace:
    """Stand-in for config.ProbesConfig with the same attribute names; every sensor reads by
    `reading`."""
    return SimpleNamespace(
        heights=tuple(
            SimpleNamespace(name=k, x=x, y=y, surface=s) for k, (x, y, s) in heights.items()
        ),
        pressures=tuple(
            SimpleNamespace(name=k, position=p, reading=reading) for k, p in pressures.items()
        ),
    )


H = math.sqrt(3.0) * DP


def _sampler(
    probes: SimpleNamespace,
    kernel: str,
    boundary: str = "mdbc",
    sample_points: dict[str, tuple[float, ...]] | None = None,
) -> ProbeSampler:
    return ProbeSampler(
        probes,
        smoothing_length=H,
        kernel=kernel,
        particle_mass=RHO0 * DP**3,
        rho0=RHO0,
        z_range=(0.0, 0.5),
        dp=DP,
        boundary=boundary,
        sample_points=sample_points,
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


#: Where the face sensors read as MeasureTool does: 1.5 h in front of their faces.
IN_FRONT = {
    "floor": (0.08, 0.06, 1.5 * H),
    "wall_deep": (1.5 * H, 0.06, 0.03),
    "wall_mid": (1.5 * H, 0.06, 0.1),
}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_measuretool_sensor_reads_the_water_in_front_of_the_face(
    kernel: str, boundary: str
) -> None:
    """A "measuretool" sensor averages the fluid alone at its sample point 1.5 h in front of
    the face, whose support reaches h/2 into the wall: it reads rho0 g (depth - z) of that
    point within 1 %, whatever pressure the wall particles carry and under either boundary."""
    faces = {name: FACE_SENSORS[name] for name in IN_FRONT}
    probes = _probes({}, faces, reading="measuretool")
    readings = []
    for wall_pressure in ("extrapolated", 1e9):
        snap, _ = _tank_corner(wall_pressure)
        values = _sampler(probes, kernel, boundary, sample_points=IN_FRONT).sample(snap)
        for name, point in IN_FRONT.items():
            expected = RHO0 * GRAVITY * (DEPTH - point[2])
            assert values[name] == pytest.approx(expected, rel=0.01), (name, wall_pressure)
        readings.append(values)
    assert readings[0] == readings[1]


def test_measuretool_reading_is_normalised_only_over_half_a_support() -> None:
    """MeasureTool's -kclimit:0.5 -kcusedummy:0: the Shepard average where the fluid's
    sum_j W_j V_j reaches 0.5, the plain sum sum_j p_j W_j V_j where the water covers less of
    the support (a sensor the water is only reaching); 0 without fluid. The "face" reading
    normalises any support and, under mDBC, adds the boundary particles' sums."""
    sampler = _sampler(_probes({}, {}), "wendland_c2", "mdbc")
    assert sampler.sensor_reading("measuretool", 300.0, 0.6, 40, 1e6, 0.5) == 500.0
    assert sampler.sensor_reading("measuretool", 120.0, 0.3, 12, 1e6, 0.5) == 120.0
    assert sampler.sensor_reading("measuretool", 0.0, 0.0, 0, 1e6, 0.5) == 0.0
    assert sampler.sensor_reading("face", 120.0, 0.3, 12, 180.0, 0.3) == 500.0
    dbc = _sampler(_probes({}, {}), "wendland_c2", "dbc")
    assert dbc.sensor_reading("face", 120.0, 0.3, 12, 1e6, 0.3) == 400.0


def test_sampler_refuses_unknown_boundary_surface_and_reading() -> None:
    with pytest.raises(ValueError, match="boundary"):
        _sampler(_probes({}, {}), "wendland_c2", "ghost")
    with pytest.raises(ValueError, match="surface"):
        _sampler(_probes({"H": (0.0, 0.0, "lowest")}, {}), "wendland_c2")
    with pytest.raises(ValueError, match="reading"):
        _sampler(_probes({}, {"P": (0.0, 0.0, 0.0)}, reading="wall"), "wendland_c2")


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


#: A tank 1 x 0.5 x 0.6 m with a box obstacle on its floor (x 0.5..0.7, y 0.1..0.3, 0.2 high);
#: dp 0.05, so h = 0.0866 m and 1.5 h = 0.1299 m.
OBSTACLE = "[[obstacle]]\nmin = [0.5, 0.1, 0.0]\nmax = [0.7, 0.3, 0.2]\n"


def _sensor(name: str, position: tuple[float, ...], extra: str = "") -> str:
    return f"[[probes.pressure]]\nname = '{name}'\nposition = {list(position)}\n{extra}"


def test_measuretool_sensors_move_1_5h_along_their_face_normal() -> None:
    """Each "measuretool" sensor reads 1.5 h in front of the face it lies on: up from the
    floor, into the tank from a side wall, out of an obstacle's face, along the diagonal from
    an obstacle's edge, along a `normal` when one is given; a sensor in the water and a "face"
    sensor read where they are. The resolved config keeps the keys."""
    sensors = {
        "floor": ((0.2, 0.25, 0.0), ""),
        "wall": ((0.0, 0.25, 0.1), ""),
        "box_front": ((0.5, 0.2, 0.1), ""),
        "box_top": ((0.6, 0.2, 0.2), ""),
        "box_edge": ((0.5, 0.2, 0.2), ""),
        "given": ((0.2, 0.25, 0.0), "normal = [0.0, 3.0, 4.0]\n"),
        "water": ((0.3, 0.25, 0.2), ""),
        "face": ((0.2, 0.25, 0.0), "reading = 'face'\n"),
    }
    text = CASE + OBSTACLE + "".join(_sensor(k, p, extra) for k, (p, extra) in sensors.items())
    cfg = loads_config(text, source="case.toml")
    offset = 1.5 * cfg.smoothing_length
    diagonal = offset / math.sqrt(2.0)
    expected = {
        "floor": (0.2, 0.25, offset),
        "wall": (offset, 0.25, 0.1),
        "box_front": (0.5 - offset, 0.2, 0.1),
        "box_top": (0.6, 0.2, 0.2 + offset),
        "box_edge": (0.5 - diagonal, 0.2, 0.2 + diagonal),
        "given": (0.2, 0.25 + 0.6 * offset, 0.8 * offset),
        "water": (0.3, 0.25, 0.2),
        "face": (0.2, 0.25, 0.0),
    }
    points = ProbeSampler.for_case(cfg).sensor_points
    for (name, point), got in zip(expected.items(), points, strict=True):
        assert got == pytest.approx(point, abs=1e-12), name
    assert loads_config(config_to_toml(cfg)) == cfg


def test_seed_case_obstacle_sensors_read_where_dualsphysics_does() -> None:
    """The seed case's obstacle sensors (face x = 0.9) read at x = 0.8779, the points
    DualSPHysics' CaseDambreak example reads its obstacle's pressure at ("PointsPressure_
    Correct": 1.5 h with the same h); SPHERIC test 2's P1..P4 1.5 h in front of the box's
    face x = 0.8245, P5..P8 1.5 h above its top z = 0.161."""
    seed = ProbeSampler.for_case(load_config(REPO_ROOT / "configs" / "dambreak.toml", []))
    assert seed.sensor_points[:, 0] == pytest.approx(0.8779, abs=1e-4)
    cfg = load_config(REPO_ROOT / "configs" / "spheric_test2.toml", [])
    points = ProbeSampler.for_case(cfg).sensor_points
    offset = 1.5 * cfg.smoothing_length
    assert points[:4, 0] == pytest.approx(0.8245 + offset)
    assert points[4:8, 2] == pytest.approx(0.161 + offset)


@pytest.mark.parametrize(
    ("sensor", "match"),
    [
        (_sensor("P", (0.2, 0.25, 0.0), "reading = 'wall'\n"), r"probes\.pressure\[0\]\.reading"),
        (_sensor("P", (0.2, 0.25, 0.0), "normal = [0, 0, 0]\n"), r"probes\.pressure\[0\]\.normal"),
        (_sensor("P", (0.0, 0.25, 0.1), "normal = [-1, 0, 0]\n"), r"outside the tank.*normal"),
    ],
)
def test_bad_sensor_reading_or_normal_is_refused(sensor: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        loads_config(CASE + sensor, source="case.toml")


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
