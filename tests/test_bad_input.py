"""Bad input through the real `dambreak run` entry: each mistake exits with code 2 and one
clear message naming the file, the key (and its line) and what is allowed; no traceback, and
no output folder is created.

tests/bad_configs/ holds one small case file per mistake; BAD_CONFIGS says which message
fragments each must produce (the key and the rule it breaks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.cli import main

BAD = Path(__file__).resolve().parent / "bad_configs"
GOOD = Path(__file__).resolve().parent / "data" / "still_water.toml"

BAD_CONFIGS: dict[str, tuple[str, ...]] = {
    # TOML syntax: line and column from the parser
    "syntax_unclosed_list.toml": ("line 8, column 1", "not valid TOML", "Unclosed array"),
    "syntax_unclosed_header.toml": ("line 4, column 6", "not valid TOML", "Expected ']'"),
    "syntax_missing_value.toml": ("line 2, column 6", "not valid TOML", "Invalid value"),
    "not_utf8.toml": ("line 13", "not UTF-8 text", "byte 0xe9"),
    # unknown keys and sections, with the closest known name
    "unknown_key_typo.toml": ("line 13", "unknown key physics.kernal", "did you mean 'kernel'"),
    "unknown_section_typo.toml": ("line 12", "unknown section [physic]", "did you mean 'physics'"),
    "unknown_key_in_array.toml": ("line 15", "unknown key fluid[1].hollow", "in [fluid]: min, max"),
    "unknown_probe_kind.toml": ("line 12", "unknown section probes.depth", "probes.height, probes"),
    "key_outside_section.toml": ("line 1", "'dp' is outside any section", "in [particles]"),
    # missing and wrong types
    "dp_missing.toml": ("line 1", "particles.dp: missing", "required"),
    "dp_string.toml": ("line 2", 'particles.dp = "0.05" (a string)', "expected a number > 0"),
    "int_given_float.toml": ("line 13", "time.verlet_euler_every = 2.5", "an integer >= 1"),
    "int_given_bool.toml": ("line 5", "tank.wall_layers = true (a boolean)", "[1, 8]"),
    "bool_given_int.toml": ("line 13", "output.vtk = 1 (an integer)", "expected true or false"),
    "vector_too_short.toml": ("line 6", "tank.max = [1.0, 0.5] (a list of 2)", "3 numbers"),
    "vector_with_string.toml": ("line 13", "physics.gravity", "holding a string", "3 numbers"),
    "case_name_space.toml": ("line 13", 'case.name = "my case"', "letters, digits, _ . -"),
    # out of range and bad choices
    "dp_zero.toml": ("line 2", "particles.dp = 0.0", "expected a number > 0"),
    "dp_negative.toml": ("line 2", "particles.dp = -0.01", "expected a number > 0"),
    "end_negative.toml": ("line 13", "time.end = -1.0", "expected a number > 0"),
    "cfl_above_one.toml": ("line 13", "time.cfl = 1.5", "expected a number in (0, 1]"),
    "cfl_zero.toml": ("line 13", "time.cfl = 0", "expected a number in (0, 1]"),
    "integrator_unknown.toml": ("line 13", 'time.integrator = "euler"', '"verlet", "symplectic"'),
    "kernel_unknown.toml": ("line 13", 'physics.kernel = "gaussian"', '"cubic_spline"'),
    "vtk_compression_unknown.toml": ("line 13", 'output.vtk_compression = "gzip"',
                                     'one of "lz4", "zlib", "none"'),
    "npz_compression_level.toml": ("line 14", "output.npz_compression = 6 (an integer)",
                                   'one of "none", "deflate"'),
    "rho_min_above_rho0.toml": ("line 13", "physics.rho_min", "rho_min < rho0 < rho_max"),
    "gravity_zero.toml": ("line 13", "physics.gravity", "must not be zero"),
    "output_interval_longer_than_end.toml": ("line 14", "time.output_interval", "at most time.end"),
    "domain_half_given.toml": ("line 12", "domain", "give both min and max, or neither"),
    # geometry
    "no_fluid.toml": ("no [[fluid]] block", "at least one is required"),
    "fluid_outside_tank.toml": ("line 8", "fluid[0]", "is not inside the tank"),
    "obstacle_outside_tank.toml": ("line 12", "obstacle[0]", "is not inside the tank"),
    "fluid_blocks_overlap.toml": ("line 12", "fluid[1]", "overlaps fluid[0]", "may touch but not"),
    "fluid_block_empty.toml": ("line 9", "fluid[0].min", "must be < max", "on z", "empty"),
    "fluid_block_inverted.toml": ("line 9", "fluid[0].min", "must be < max", "on x", "inverted"),
    "fluid_block_too_thin.toml": ("line 8", "fluid[0]", "holds no particle", "on z", "dp = 0.05"),
    "fluid_inside_obstacle.toml": ("line 8", "fluid[0]", "lies inside obstacle[0]"),
    "probe_height_outside.toml": ("line 12", "probes.height[0]", "'gauge'", "outside the tank"),
    "probe_pressure_outside.toml": ("line 12", "probes.pressure[0]", "'p1'", "outside the tank"),
    "probe_names_repeat.toml": ("line 18", "probes.pressure[0].name", "probe names must be unique"),
    # meshes (tests/bad_configs/meshes/: box.obj, an open box, a text file named .stl)
    "mesh_file_missing.toml": ("line 13", 'obstacle[0].mesh = "meshes/no_such_file.stl"',
                               "no such file"),
    "mesh_not_a_mesh.toml": ("line 13", "obstacle[0].mesh", "holds no triangle", "as STL"),
    "mesh_format_unknown.toml": ("line 13", "obstacle[0].mesh", "'.step' is not a mesh format",
                                 "allowed: .stl, .obj, .ply, .off"),
    "mesh_not_closed.toml": ("line 13", "obstacle[0].mesh", "not closed (watertight)", "4 edges",
                             "can be a [terrain]"),
    "mesh_outside_tank.toml": ("line 13", "obstacle[0].mesh", "mesh box.obj", "[1.0, 0.125, 0.0]",
                               "is not inside the tank"),
    "mesh_too_thin.toml": ("line 13", "obstacle[0].mesh", "0.025 m on z", "thinner than dp"),
    "mesh_and_box.toml": ("line 14", "obstacle[0].min", "either min and max", "not both"),
    "mesh_case_too_many_particles.toml": ("particles.dp = 1e-05 gives", "32-bit indices"),
    "terrain_not_height_field.toml": ("line 13", "terrain.mesh", "crosses it 2 times",
                                      "not a height field"),
    "terrain_not_covering.toml": ("line 13", "terrain.mesh", "misses it",
                                  "does not cover the whole tank floor"),
    "terrain_without_mesh.toml": ("line 12", "terrain", "no mesh"),
    "fluid_inside_mesh.toml": ("fluid: the [[fluid]] blocks hold no lattice point",),
    # water filling a mesh
    "fluid_mesh_open.toml": ("line 9", "fluid[0].mesh", "not closed (watertight)", "4 edges",
                             "a fluid block must enclose its water"),
    "fluid_mesh_and_box.toml": ("line 10", "fluid[0].min", "either min and max", "not both"),
    "fluid_scale_without_mesh.toml": ("line 11", "fluid[0].scale",
                                      "places a mesh, and this fluid block has none"),
    "fluid_mesh_outside_tank.toml": ("line 9", "fluid[0].mesh", "mesh box.obj",
                                     "[1.0, 0.125, 0.0]", "is not inside the tank"),
    "fluid_mesh_too_thin.toml": ("line 9", "fluid[0].mesh", "0.025 m on z", "thinner than dp"),
    "fluid_mesh_overlaps_block.toml": ("line 13", "fluid[1].mesh", "overlaps fluid[0]",
                                       "may touch but not overlap", "by its bounding box"),
    "fluid_mesh_holds_no_point.toml": ("fluid[1].mesh", "mesh box.obj", "holds no lattice point",
                                       "strictly inside it"),
}  # fmt: skip
"""Every file of tests/bad_configs/ and the fragments its message must hold."""


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`dambreak run ARGS`: the exit code and what went to stderr."""
    code = main(["run", *args])
    return code, capsys.readouterr().err


def assert_refused(code: int, err: str, fragments: tuple[str, ...], out: Path) -> None:
    """Exit code 2, every fragment in the one error line, no traceback, no output folder."""
    assert code == 2, err
    assert "Traceback" not in err, err
    message = [line for line in err.splitlines() if line.startswith("dambreak run: error: ")]
    assert len(message) == 1, err
    for fragment in fragments:
        assert fragment in message[0], (fragment, message[0])
    assert not out.exists()


def test_the_corpus_is_complete() -> None:
    files = {p.name for p in BAD.glob("*.toml")}
    assert files == set(BAD_CONFIGS)
    assert len(files) >= 25


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_bad_config_is_refused_with_its_message(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    path = BAD / name
    code, err = run_cli([str(path), "--out", str(out), "--backend", "cpu"], capsys)
    assert_refused(code, err, (str(path),) + BAD_CONFIGS[name], out)


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("time.ned=3", ("--set time.ned", "unknown key 'ned' in [time]", "did you mean 'end'")),
        ("phyics.kernel=x", ("unknown section 'phyics'", "did you mean 'physics'")),
        ("time.end", ("--set 'time.end'", "expected section.key=value")),
        ("time.end=", ("--set time.end", "empty value")),
        ("time.cfl=1.5", ("time.cfl (from --set) = 1.5", "a number in (0, 1]")),
        ("time.end=[1, 2", ("time.end (from --set)", "expected a number > 0")),
        ("fluid.min=[0, 0, 0]", ("[[fluid]] is an array of tables", "edit the case file")),
        ("tank.open_top=maybe", ('tank.open_top (from --set) = "maybe"', "true or false")),
    ],
)
def test_bad_override_is_refused(
    override: str, fragments: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, err = run_cli([str(GOOD), "--out", str(out), "--set", override], capsys)
    assert_refused(code, err, (str(GOOD),) + fragments, out)


@pytest.mark.parametrize("backend", ["vulkan", "metal", "cuda"])
def test_f64_on_an_f32_backend_names_file_key_and_choices(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """f64 runs on the CPU alone: Vulkan and Metal have no f64 kernels, and on CUDA Taichi 1.7.4
    faults in the cell-grid kernel (solver/backend.py); refused before anything is written."""
    out = tmp_path / "out"
    args = [str(GOOD), "--out", str(out), "--backend", backend, "--set", "physics.precision=f64"]
    code, err = run_cli(args, capsys)
    fragments = (
        f'{GOOD}: physics.precision = "f64" is not allowed on backend {backend}',
        'allowed there: "f32"',
        "or run on cpu",
    )
    assert_refused(code, err, fragments, out)


def test_missing_file_folder_and_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    missing = tmp_path / "nope.toml"
    code, err = run_cli([str(missing), "--out", str(out)], capsys)
    assert_refused(code, err, (f"{missing}: no such case file",), out)
    code, err = run_cli([str(tmp_path), "--out", str(out)], capsys)
    assert_refused(code, err, (f"{tmp_path}: is a folder", "expected a TOML case file"), out)

    def denied(path: Path) -> bytes:  # as for a file without read permission (root reads all)
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "read_bytes", denied)
    code, err = run_cli([str(GOOD), "--out", str(out)], capsys)
    assert_refused(code, err, (f"{GOOD}: cannot read the case file: permission denied",), out)
