"""The case-file contract: defaults, checks that name the file and key, derived numbers, and the
TOML round trip. No Taichi needed."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import types
from pathlib import Path

import pytest

from solver.config import (
    BUILTIN_QUICK_SOURCE,
    SCHEMA,
    Config,
    ConfigError,
    PhysicsConfig,
    TimeConfig,
    config_to_toml,
    load_config,
    loads_config,
)
from solver.physics.smoothing_kernels import KERNEL_NAMES
from solver.toml_lines import key_line

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
SEED = ROOT / "configs" / "dambreak.toml"

MINIMAL = """
[particles]
dp = 0.05
[tank]
min = [0.0, 0.0, 0.0]
max = [1.0, 0.5, 0.6]
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.5, 0.3]
"""


def minimal(extra: str = "", overrides: tuple[str, ...] = ()) -> Config:
    """A small valid case plus `extra` TOML text."""
    return loads_config(MINIMAL + extra, source="minimal.toml", overrides=overrides)


def write(tmp_path: Path, text: str, name: str = "case.toml") -> Path:
    """A case file in a temporary folder."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- loading --------------------------------------------------------------------------------


def test_no_path_loads_the_quick_case() -> None:
    cfg = load_config(None)
    assert cfg.source == BUILTIN_QUICK_SOURCE
    assert cfg.name == "quick"
    assert cfg == load_config(ROOT / "configs" / "quick.toml")


def test_shipped_configs_are_there() -> None:
    names = {p.stem for p in CONFIGS}
    assert {"dambreak", "quick", "spheric_test2", "column_collapse"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_loads_and_round_trips(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.name == path.stem
    again = loads_config(config_to_toml(cfg), source="resolved")
    assert again == cfg


def test_defaults_fill_missing_keys() -> None:
    cfg = minimal()
    assert cfg.name == "case"
    assert cfg.physics == PhysicsConfig()
    assert cfg.time == TimeConfig()
    assert cfg.physics.kernel == "cubic_spline"
    assert cfg.physics.h_over_dp == pytest.approx(math.sqrt(3.0))
    assert cfg.tank.open_top is True
    assert cfg.output.vtk is True
    assert cfg.probe_interval == cfg.time.output_interval
    assert cfg.obstacles == ()
    assert cfg.probes.heights == () and cfg.probes.pressures == ()


def test_dataclass_defaults_come_from_the_schema_table() -> None:
    for spec in SCHEMA:
        cls = {"physics": PhysicsConfig, "time": TimeConfig}.get(spec.section)
        if cls is not None:
            default = {f.name: f.default for f in dataclasses.fields(cls)}[spec.key]
            assert default == spec.default, spec.path


def test_name_defaults_to_file_stem(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL, "my_case.toml"))
    assert cfg.name == "my_case"
    assert cfg.source == str(tmp_path / "my_case.toml")


def test_default_domain_surrounds_walls_and_open_top() -> None:
    cfg = minimal()
    margin = cfg.tank.wall_layers * cfg.dp + cfg.support_radius
    assert cfg.domain.min == pytest.approx((-margin, -margin, -margin))
    assert cfg.domain.max == pytest.approx((1.0 + margin, 0.5 + margin, 0.6 + margin + 0.6))


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_domain_must_hold_the_walls_where_the_boundary_puts_them(boundary: str) -> None:
    """One wall layer lies on the tank faces under DBC, dp/2 outside them under mDBC (English
    et al. 2022): a domain that just holds the DBC walls is refused under mDBC, naming them."""
    tight = "[domain]\nmin = [0.0, 0.0, 0.0]\nmax = [1.0, 0.5, 1.2]\n"
    over = ("tank.wall_layers=1", f"physics.boundary={boundary}")
    if boundary == "dbc":
        assert minimal(tight, over).domain.max == (1.0, 0.5, 1.2)
        return
    with pytest.raises(ConfigError, match=r"does not contain the tank walls.*-0\.025"):
        minimal(tight, over)
    roomy = tight.replace("0.0, 0.0, 0.0", "-0.025, -0.025, -0.025").replace(
        "1.0, 0.5", "1.025, 0.525"
    )
    assert minimal(roomy, over).domain.min == (-0.025, -0.025, -0.025)


def test_config_is_frozen() -> None:
    cfg = minimal()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dp = 1.0  # type: ignore[misc]


# -- derived numbers ------------------------------------------------------------------------


def test_seed_case_derived_quantities() -> None:
    """cases.md section 1: c0 = 20 sqrt(g h_swl), B = c0^2 rho0 / 7, H = sqrt(3) dp."""
    cfg = load_config(SEED)
    dp = 0.0085
    assert cfg.dp == dp
    assert cfg.water_height == pytest.approx(0.3)
    c0 = 20.0 * math.sqrt(9.81 * 0.3)
    assert cfg.sound_speed == pytest.approx(c0, rel=1e-12)
    assert cfg.eos_b == pytest.approx(c0**2 * 1000.0 / 7.0, rel=1e-12)
    assert cfg.smoothing_length == pytest.approx(math.sqrt(3.0) * dp, rel=1e-12)
    assert cfg.smoothing_length == pytest.approx(0.014722, abs=1e-6)
    assert cfg.support_radius == pytest.approx(2.0 * math.sqrt(3.0) * dp, rel=1e-12)
    assert cfg.particle_mass == pytest.approx(6.14125e-4, rel=1e-12)
    assert cfg.eta2 == pytest.approx(0.01 * 3.0 * dp**2, rel=1e-12)


def test_h_swl_defaults_to_highest_fluid_top_above_floor() -> None:
    text = MINIMAL.replace(
        "min = [0.0, 0.0, 0.0]\nmax = [1.0", "min = [0.0, 0.0, -0.1]\nmax = [1.0"
    )
    extra = "[[fluid]]\nmin = [0.5, 0.0, 0.0]\nmax = [0.7, 0.5, 0.45]\n"
    cfg = loads_config(text + extra)
    assert cfg.physics.h_swl is None
    assert cfg.water_height == pytest.approx(0.55)
    assert minimal("[physics]\nh_swl = 0.2\n").water_height == 0.2


# -- overrides ------------------------------------------------------------------------------


def test_overrides_set_values() -> None:
    cfg = load_config(
        SEED,
        [
            "physics.kernel=wendland_c2",
            "time.end=.5",
            "tank.wall_layers=3",
            "physics.precision = 'f64'",
            "physics.gravity=[0, 0, -9.8]",
            "output.vtk=false",
            "case.name=short",
        ],
    )
    assert cfg.physics.kernel == "wendland_c2"
    assert cfg.time.end == 0.5
    assert cfg.tank.wall_layers == 3
    assert cfg.physics.precision == "f64"
    assert cfg.physics.gravity == (0.0, 0.0, -9.8)
    assert cfg.output.vtk is False
    assert cfg.name == "short"


def test_override_of_a_section_absent_from_the_file() -> None:
    cfg = minimal(overrides=("output.probe_interval=0.001",))
    assert cfg.probe_interval == 0.001


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("physics.kernel=gaussian", ["physics.kernel", "--set", "cubic_spline", "wendland_c2"]),
        ("physics.nope=1", ["physics.nope", "nope", "kernel", "visc_alpha"]),
        ("nosection.key=1", ["nosection", "physics", "time"]),
        ("fluid.min=[0,0,0]", ["fluid", "array of tables"]),
        ("time.end", ["time.end", "section.key=value"]),
        ("time.end=", ["time.end", "empty"]),
        ("time.cfl=2", ["time.cfl", "(0, 1]"]),
        ("tank.wall_layers=2.5", ["tank.wall_layers", "integer"]),
    ],
)
def test_bad_overrides_name_the_key(override: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(SEED, [override])
    message = str(err.value)
    assert str(SEED) in message
    for text in expected:
        assert text in message, message


# -- errors ---------------------------------------------------------------------------------


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="no such case file"):
        load_config(ROOT / "configs" / "does_not_exist.toml")


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[physics\n")
    with pytest.raises(ConfigError, match="not valid TOML") as err:
        load_config(path)
    assert str(path) in str(err.value)


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "[physics]\nkernal = 'wendland_c2'\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message
    assert "physics.kernal" in message
    assert "kernel" in message  # the allowed keys are listed


def test_unknown_section_and_unknown_key_in_array(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown section \[physic\]"):
        load_config(write(tmp_path, MINIMAL + "[physic]\nrho0 = 1000.0\n"))
    with pytest.raises(ConfigError, match=r"fluid\[1\]\.hollow"):
        minimal("[[fluid]]\nmin = [0.5, 0.0, 0.0]\nmax = [0.6, 0.5, 0.2]\nhollow = true\n")
    with pytest.raises(ConfigError, match="probes.depth"):
        minimal("[[probes.depth]]\nname = 'a'\n")


def test_bad_choice_lists_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        minimal("[physics]\nkernel = 'gaussian'\n")
    message = str(err.value)
    assert "minimal.toml" in message and "physics.kernel" in message and "gaussian" in message
    for name in KERNEL_NAMES:
        assert name in message
    for key, value, allowed in [
        ("density_diffusion", "'delta'", ["none", "molteni", "fourtakas"]),
        ("precision", "'f16'", ["f32", "f64"]),
    ]:
        with pytest.raises(ConfigError) as err:
            minimal(f"[physics]\n{key} = {value}\n")
        for choice in allowed:
            assert choice in str(err.value)
    with pytest.raises(ConfigError, match="verlet.*symplectic"):
        minimal("[time]\nintegrator = 'rk4'\n")


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("[time]\ncfl = 0.0\n", "time.cfl"),
        ("[time]\ncfl = 1.01\n", "time.cfl"),
        ("[time]\nend = 0.0\n", "time.end"),
        ("[time]\nend = 0.5\noutput_interval = 0.6\n", "time.output_interval"),
        ("[time]\noutput_interval = -0.1\n", "time.output_interval"),
        ("[time]\ndt_min = 0.02\n", "time.dt_min"),
        ("[time]\nverlet_euler_every = 0\n", "time.verlet_euler_every"),
        ("[physics]\nrho_min = 1000.0\n", "physics.rho_min"),
        ("[physics]\nrho_max = 990.0\n", "physics.rho_min"),
        ("[physics]\nrho0 = -1.0\n", "physics.rho0"),
        ("[physics]\ngravity = [0, 0, 0]\n", "physics.gravity"),
        ("[physics]\ngravity = [0, -9.81]\n", "physics.gravity"),
        ("[physics]\nh_over_dp = 0.5\n", "physics.h_over_dp"),
        ("[physics]\nvisc_alpha = nan\n", "physics.visc_alpha"),
        ("[physics]\ndelta = true\n", "physics.delta"),
        ("[physics]\ncoefsound = '20'\n", "physics.coefsound"),
        ("[output]\nvtk = 1\n", "output.vtk"),
        ("[output]\nprobe_interval = 5.0\n", "output.probe_interval"),
        ("[case]\nname = 'a b'\n", "case.name"),
        ("[domain]\nmin = [-1, -1, -1]\n", "domain"),
        ("[domain]\nmin = [-1, -1, -1]\nmax = [1, 1, 1]\n", "domain"),
    ],
)
def test_range_and_type_errors_name_the_key(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        minimal(extra)
    assert key in str(err.value)
    assert "minimal.toml" in str(err.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (MINIMAL.replace("dp = 0.05", "dp = 0.0"), "particles.dp"),
        (MINIMAL.replace("dp = 0.05", "dp = -0.01"), "particles.dp"),
        (MINIMAL.replace("dp = 0.05\n", ""), "particles.dp"),
        (MINIMAL.replace("max = [1.0, 0.5, 0.6]", "max = [1.0, 0.0, 0.6]"), "tank.min"),
        (MINIMAL + "[tank.extra]\n", "tank.extra"),
    ],
)
def test_particles_and_tank_errors(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        loads_config(text, source="x.toml")


def test_wall_layers_range() -> None:
    text = MINIMAL.replace("max = [1.0, 0.5, 0.6]", "max = [1.0, 0.5, 0.6]\nwall_layers = {}")
    assert loads_config(text.format(1)).tank.wall_layers == 1
    assert loads_config(text.format(8)).tank.wall_layers == 8
    for bad in (0, 9):
        with pytest.raises(ConfigError, match=r"tank\.wall_layers.*\[1, 8\]"):
            loads_config(text.format(bad))


def test_geometry_must_lie_in_the_tank() -> None:
    with pytest.raises(ConfigError, match=r"fluid\[1\].*not inside the tank"):
        minimal("[[fluid]]\nmin = [0.5, 0.0, 0.0]\nmax = [1.2, 0.5, 0.3]\n")
    with pytest.raises(ConfigError, match=r"obstacle\[0\].*not inside the tank"):
        minimal("[[obstacle]]\nmin = [0.5, 0.4, 0.0]\nmax = [0.6, 0.6, 0.2]\n")
    # an obstacle may rise above an open top, not through a lid
    tall = "[[obstacle]]\nmin = [0.5, 0.1, 0.0]\nmax = [0.6, 0.3, 0.7]\n"
    assert minimal(tall).obstacles[0].box.max[2] == 0.7
    with pytest.raises(ConfigError, match=r"obstacle\[0\]"):
        minimal(tall, overrides=("tank.open_top=false",))
    with pytest.raises(ConfigError, match=r"fluid\[0\].min"):
        loads_config(MINIMAL.replace("max = [0.3, 0.5, 0.3]", "max = [0.3, 0.5, 0.0]"))


def test_no_fluid_is_an_error() -> None:
    text = MINIMAL.split("[[fluid]]")[0]
    with pytest.raises(ConfigError, match="fluid"):
        loads_config(text)


def test_probes_inside_tank_and_unique() -> None:
    ok = minimal(
        "[[probes.height]]\nname = 'H1'\nx = 0.5\ny = 0.25\n"
        "[[probes.pressure]]\nname = 'P1'\nposition = [1.0, 0.25, 0.1]\n"
    )
    assert ok.probes.heights[0].name == "H1"
    assert ok.probes.pressures[0].position == (1.0, 0.25, 0.1)
    with pytest.raises(ConfigError, match=r"probes\.height\[0\].*outside the tank"):
        minimal("[[probes.height]]\nname = 'H1'\nx = 1.5\ny = 0.25\n")
    with pytest.raises(ConfigError, match=r"probes\.pressure\[0\].*outside the tank"):
        minimal("[[probes.pressure]]\nname = 'P1'\nposition = [0.5, 0.25, -0.1]\n")
    with pytest.raises(ConfigError, match=r"probes\.pressure\[0\]\.name.*twice"):
        minimal(
            "[[probes.height]]\nname = 'A'\nx = 0.5\ny = 0.25\n"
            "[[probes.pressure]]\nname = 'A'\nposition = [0.5, 0.25, 0.1]\n"
        )
    with pytest.raises(ConfigError, match=r"probes\.height\[0\]\.x.*missing"):
        minimal("[[probes.height]]\nname = 'H1'\ny = 0.25\n")


def test_error_from_an_override_says_so() -> None:
    with pytest.raises(ConfigError, match=r"physics\.delta \(from --set\)"):
        minimal(overrides=("physics.delta=3",))


# -- round trip and docs --------------------------------------------------------------------


def test_round_trip_keeps_derived_defaults_derived() -> None:
    cfg = minimal(
        "[[obstacle]]\nmin = [0.5, 0.1, 0.0]\nmax = [0.6, 0.3, 0.2]\nhollow = true\n"
        "[[probes.height]]\nname = 'H1'\nx = 0.5\ny = 0.25\n"
        "[[probes.pressure]]\nname = 'P1'\nposition = [0.6, 0.2, 0.1]\n"
    )
    text = config_to_toml(cfg)
    again = loads_config(text)
    assert again == cfg
    assert again.physics.h_swl is None and again.output.probe_interval is None
    assert "wall_layers = 3" in text  # defaults are written out
    body = text.split("\n", 1)[1]  # all but the first line, which names the source
    assert config_to_toml(again).split("\n", 1)[1] == body


def _gen_docs_module() -> types.ModuleType:
    """scripts/gen_config_docs.py imported as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "gen_config_docs", ROOT / "scripts" / "gen_config_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_docs_are_up_to_date() -> None:
    generated = _gen_docs_module().render()
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == generated, "run: python3 scripts/gen_config_docs.py"
    for spec in SCHEMA:
        assert f"`{spec.key}`" in generated


# -- where a key is written -----------------------------------------------------------------

LINES_TEXT = """# a comment
[particles]
dp = 0.05  # m

[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.5, 0.3]

[[fluid]]
max = [0.6, 0.5, 0.3]

[ probes . height ]
"x" = 1.0
physics.kernel = "x"
"""


@pytest.mark.parametrize(
    ("section", "key", "index", "line"),
    [
        ("particles", "dp", None, 3),
        ("particles", None, None, 2),
        ("fluid", "max", 0, 7),
        ("fluid", "max", 1, 10),
        ("fluid", "min", 1, 9),  # not written in that entry: its header
        ("fluid", None, 2, None),
        ("probes.height", "x", None, 13),
        ("physics", "kernel", None, None),  # a dotted key inside another table
        ("time", "end", None, None),
    ],
)
def test_key_line_follows_headers_and_keys(
    section: str, key: str | None, index: int | None, line: int | None
) -> None:
    assert key_line(LINES_TEXT, section, key, index) == line
