"""Tests of `dambreak validate`: a synthetic column collapse whose front follows Martin & Moyce's
table exactly passes with zero error, one far ahead fails, one that leads by a gate-release
offset is recognised as such; SPHERIC test 2 series are compared with a measurement file, and
malformed measurement files are refused with the file and the problem named.
"""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from solver.cli import main as dambreak
from solver.config import Config, load_config
from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot
from solver.validation.experiments import DATA_DIR, compare_to_table, read_reference_table
from solver.validation.run_folder import write_run_folder
from solver.validation.spheric import compare_series, read_experiment_csv

REPO = Path(__file__).resolve().parents[1]
G = 9.81
A = 0.05715  # column width of configs/column_collapse.toml

MM_FRONT = read_reference_table(DATA_DIR / "martin_moyce_1952_n2_2_front.csv")
MM_HEIGHT = read_reference_table(DATA_DIR / "martin_moyce_1952_n2_2_height.csv")
KO_FRONT = read_reference_table(DATA_DIR / "koshizuka_oka_1996_exp_front.csv")


def collapse_config(*overrides: str) -> Config:
    """The column-collapse case at a / dp = 10."""
    return load_config(
        REPO / "configs" / "column_collapse.toml", ["particles.dp=0.005715", *overrides]
    )


def column(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """The column's fluid lattice (x, y, z = dp, 2 dp, ...) and a floor of wall particles."""
    dp = cfg.dp
    block = cfg.fluid_blocks[0]
    nx, nz = round(block.size[0] / dp), round(block.size[2] / dp)
    ny = round(cfg.tank.box.size[1] / dp)
    g = np.meshgrid(np.arange(1, nx + 1), np.arange(1, ny), np.arange(1, nz + 1), indexing="ij")
    fluid = np.stack([c.ravel() for c in g], axis=1) * dp
    f = np.meshgrid(np.arange(0, 6 * nx), np.arange(0, ny + 1), [0], indexing="ij")
    floor = np.stack([c.ravel() for c in f], axis=1) * dp
    kind = np.r_[np.full(len(fluid), ParticleKind.FLUID), np.full(len(floor), ParticleKind.WALL)]
    return np.concatenate([fluid, floor]), kind.astype(np.int32)


def collapse_run(
    path: Path, *, front_scale: float = 1.0, lead_T: float = 0.0, end_T: float = 4.0
) -> Path:
    """A run whose front is Z(T) = 1 + front_scale (Z_MM(T + lead_T) - 1) and whose height at
    the back wall is H_MM(tau), both interpolated in the tables (from Z = H = 1 at t = 0).

    The fluid is stretched along x keeping its first column at x = dp, so the 99.5th percentile
    of x near the floor is exactly Z a, and squeezed along z, so the column's top is 2a H.
    Snapshots are taken at the tables' times (and those less lead_T), so that interpolating
    the run back onto the tables is exact.
    """
    cfg = collapse_config()
    dp = cfg.dp
    s_T, s_tau = math.sqrt(2 * G / A), math.sqrt(G / A)
    T_points = np.r_[
        0.0,
        MM_FRONT["T"],
        MM_FRONT["T"] - lead_T,
        KO_FRONT["T"],
        MM_HEIGHT["tau"] * math.sqrt(2.0),
        end_T,
    ]
    times = np.unique(np.round(T_points[(T_points >= 0) & (T_points <= end_T)] / s_T, 12))
    p0, kind = column(cfg)
    fluid = kind == ParticleKind.FLUID
    zt = np.r_[1.0, MM_FRONT["Z"]]
    Tt = np.r_[0.0, MM_FRONT["T"]]
    snapshots = []
    for step, t in enumerate(times):
        Z = 1.0 + front_scale * (np.interp(t * s_T + lead_T, Tt, zt) - 1.0)
        H = np.interp(t * s_tau, np.r_[0.0, MM_HEIGHT["tau"]], np.r_[1.0, MM_HEIGHT["H"]])
        p = p0.copy()
        p[fluid, 0] = dp + (p0[fluid, 0] - dp) * (Z * A - dp) / (A - dp)
        p[fluid, 2] = p0[fluid, 2] * H
        n = len(p)
        snapshots.append(
            Snapshot(
                float(t),
                step,
                p.astype(np.float32),
                np.zeros((n, 3), np.float32),
                np.full(n, 1000.0, np.float32),
                np.zeros(n, np.float32),
                kind,
                np.arange(n, dtype=np.int32),
            )
        )
    return write_run_folder(path, cfg, snapshots)


def test_front_following_martin_moyce_passes(tmp_path: Path, capsys: pytest.CaptureFixture):
    run = collapse_run(tmp_path / "run")
    assert dambreak(["validate", "column_collapse", "--run", str(run)]) == 0
    out = run / "validation"
    for name in ("report.md", "report.json", "front.png", "height.png"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    mm = report["front"]["Martin & Moyce 1952, front"]
    assert mm["raw"]["mean_abs_error"] < 1e-6 and mm["raw"]["max_abs_error"] < 1e-6
    assert mm["raw"]["covered"] and mm["raw"]["points"] == 15
    assert mm["shifted"]["offset"] == 0.0
    height = report["height"]["Martin & Moyce 1952, height"]["raw"]
    assert height["mean_abs_error"] < 1e-6 and height["points"] == 12  # rows up to T = 4
    assert report["passed"] and report["exit_status"] == 0
    ko = report["front"]["Koshizuka & Oka 1996, front"]["raw"]
    assert ko["points"] == 9 and ko["mean_abs_error"] > 0.01  # a different experiment
    text = (out / "report.md").read_text()
    assert "PASS" in text and "offset" in text
    assert "verdict: PASS" in capsys.readouterr().out


def test_front_far_off_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = collapse_run(tmp_path / "run", front_scale=1.5)
    out = tmp_path / "report"
    assert dambreak(["validate", "column_collapse", "--run", str(run), "--out", str(out)]) == 1
    report = json.loads((out / "report.json").read_text())
    mm = report["front"]["Martin & Moyce 1952, front"]["raw"]
    assert mm["mean_abs_error"] > 0.5
    assert not report["passed"] and "> 0.15" in report["reasons"][0]
    assert "FAIL" in (out / "report.md").read_text()


def test_gate_release_offset_is_found_and_reported_beside_raw(tmp_path: Path) -> None:
    """A front leading the table by 0.2 T: dT = 0.2 removes the error, but the verdict is
    taken on the raw error, which fails."""
    run = collapse_run(tmp_path / "run", lead_T=0.2)
    assert dambreak(["validate", "column_collapse", "--run", str(run)]) == 1
    report = json.loads((run / "validation" / "report.json").read_text())
    mm = report["front"]["Martin & Moyce 1952, front"]
    assert mm["raw"]["mean_abs_error"] > 0.15
    assert mm["shifted"]["offset"] == pytest.approx(0.2)
    assert mm["shifted"]["mean_abs_error"] < 1e-6
    text = (run / "validation" / "report.md").read_text()
    assert "0.2 T" in text and "raw" in text


def test_a_run_too_short_for_the_table_fails(tmp_path: Path) -> None:
    run = collapse_run(tmp_path / "run", end_T=2.0)
    assert dambreak(["validate", "column_collapse", "--run", str(run)]) == 1
    report = json.loads((run / "validation" / "report.json").read_text())
    assert "covers 7 of the 15 rows" in report["reasons"][0]


def test_without_run_the_case_is_run_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """No --run: configs/CASE.toml (with --set) goes to run_simulation, then is validated."""
    calls = []

    def run_simulation(cfg: Config, out_dir: Path, **options: object) -> dict:
        calls.append((cfg, out_dir, options))
        collapse_run(out_dir)
        return {}

    fake = types.ModuleType("solver.run")
    fake.run_simulation = run_simulation  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "solver.run", fake)
    monkeypatch.chdir(tmp_path)
    args = ["validate", "column_collapse", "--backend", "cpu", "--set", "time.end=0.3"]
    assert dambreak(args) == 0
    ((cfg, out_dir, options),) = calls
    assert cfg.time.end == 0.3 and out_dir == Path("outputs/column_collapse")
    assert options == {"backend": "cpu", "threads": None, "force": False}
    assert (tmp_path / "outputs" / "column_collapse" / "validation" / "report.md").is_file()


def test_compare_to_table_offset_search() -> None:
    T = np.linspace(0.0, 4.0, 401)
    Z = 1.0 + 0.5 * T**2
    table_T = np.array([0.5, 1.0, 2.0])
    result = compare_to_table(
        T, Z, table_T, 1.0 + 0.5 * (table_T - 0.1) ** 2, np.arange(0.0, 0.301, 0.01)
    )
    assert result["raw"]["mean_abs_error"] > 0.05
    assert result["shifted"]["offset"] == pytest.approx(0.1)
    assert result["shifted"]["mean_abs_error"] < 1e-3


# ------------------------------------------------------------------------------ SPHERIC test 2

SPHERIC_T = np.round(np.arange(0.0, 2.0 + 1e-9, 0.01), 10)


def spheric_signal(name: str, t: np.ndarray) -> np.ndarray:
    """A smooth series per probe: heights oscillate, pressures rise to a peak at 0.5 s (H1_swl
    and H1_top, the other definitions of H1, as H1)."""
    k = int(name[1:].split("_")[0])
    if name.startswith("H"):
        return 0.1 * k + 0.05 * np.sin(2 * np.pi * t)
    return 1000.0 * k * np.exp(-(((t - 0.5) / 0.1) ** 2))


@pytest.fixture(scope="module")
def spheric_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = load_config(REPO / "configs" / "spheric_test2.toml", ["particles.dp=0.1"])
    names = [g.name for g in cfg.probes.heights] + [p.name for p in cfg.probes.pressures]
    series = {name: spheric_signal(name, SPHERIC_T) for name in names}
    return write_run_folder(
        tmp_path_factory.mktemp("spheric") / "run", cfg, [], probes=(SPHERIC_T, series)
    )


def test_spheric_series_without_experiment(spheric_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "v"
    assert (
        dambreak(["validate", "spheric_test2", "--run", str(spheric_run), "--out", str(out)]) == 0
    )
    for name in ("report.md", "report.json", "heights.png", "pressures.png", "spheric_series.csv"):
        assert (out / name).is_file(), name
    header = (out / "spheric_series.csv").read_text().splitlines()[0].split(",")
    # the shipped config reads every gauge three ways (H<k>, H<k>_swl, H<k>_top) and every
    # sensor two (P<k> as DualSPHysics' MeasureTool, P<k>_face on the face)
    heights = [f"H{k}{variant}" for k in range(1, 5) for variant in ("", "_swl", "_top")]
    pressures = [f"P{k}{variant}" for k in range(1, 9) for variant in ("", "_face")]
    assert header == ["t", *heights, *pressures]
    # The run's own figures, without a measurement: heights 0.1 k + 0.05 sin(2 pi t) average
    # 0.1 k over the first 2 s (two whole periods) and after (the one sample at 2 s); P<k>'s
    # pulse of 1000 k Pa at 0.5 s peaks in the window [0.50, 0.52) (mean of its samples at 0.50
    # and 0.51), P2 reaches 1 kPa at 0.42 s, the level after 1 s is nil and nothing is in tension.
    report = json.loads((out / "report.json").read_text())
    own = report["own_figures"]
    assert list(own) == heights + pressures
    assert own["H3"]["mean_first_2s"] == pytest.approx(0.3, abs=1e-9)
    assert own["H3"]["mean_after_2s"] == pytest.approx(0.3, abs=1e-9)
    assert own["P1"]["peak"] == pytest.approx(500.0 * (1.0 + math.exp(-0.01)))
    assert own["P1"]["peak_time"] == pytest.approx(0.51)
    assert own["P2"]["arrival"] == pytest.approx(0.42)
    assert own["P2"]["level"] == pytest.approx(0.0, abs=1e-6) and own["P2"]["level_windows"] == 51
    assert all(f["tension"]["seconds"] == 0.0 for n, f in own.items() if n.startswith("P"))
    assert "## The run's own figures" in (out / "report.md").read_text()


def test_spheric_against_an_experiment_file(spheric_run: Path, tmp_path: Path) -> None:
    """H1 measured 0.01 m higher, P1 peaking 0.02 s later, on another time grid, a gap in H2."""
    t = np.round(np.arange(0.005, 1.9951, 0.01), 10)
    h1 = spheric_signal("H1", t) + 0.01
    h2 = spheric_signal("H2", t)
    p1 = spheric_signal("P1", t - 0.02)
    lines = ["# synthetic measurement", "t,H1,H2,P1,notes"]
    for k in range(t.size):
        h2_cell = "" if k % 10 == 3 else repr(float(h2[k]))
        lines.append(f"{float(t[k])!r},{float(h1[k])!r},{h2_cell},{float(p1[k])!r},x")
    experiment = tmp_path / "measured.csv"
    experiment.write_text("\n".join(lines) + "\n")
    out = tmp_path / "v"
    args = [
        "validate",
        "spheric_test2",
        "--run",
        str(spheric_run),
        "--experiment",
        str(experiment),
        "--out",
        str(out),
    ]
    assert dambreak(args) == 0
    report = json.loads((out / "report.json").read_text())
    result = report["comparison"]
    # the variants H<k>_swl, H<k>_top, P<k>_face are compared with the measured H<k>, P<k> too
    assert sorted(result) == ["H1", "H1_swl", "H1_top", "H2", "H2_swl", "H2_top", "P1", "P1_face"]
    assert result["H1"]["rms_error"] == pytest.approx(0.01, rel=2e-3)
    assert result["H2"]["rms_error"] < 1e-4 and result["H2"]["points"] == t.size - 20
    assert result["P1"]["peak_exp"] == pytest.approx(1000.0, rel=5e-3)  # sampled off-peak
    assert result["P1"]["peak_exp_time"] == pytest.approx(0.515, abs=0.006)
    assert result["P1"]["peak_sim_time"] == pytest.approx(0.5)
    yardstick = report["yardstick"]  # window means: 50 ms heights, 20 ms pressures
    assert sorted(yardstick) == sorted(result)
    assert yardstick["H1"]["bias"] == pytest.approx(-0.01, abs=1e-4)  # other sample times
    assert yardstick["H2"]["rms"] < 1e-3
    assert any("notes" in note for note in report["notes"])
    assert "P1" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("time_s,H1\n0,1\n1,2\n", "no column 't'"),
        ("t,X1\n0,1\n1,2\n", "no column among"),
        ("t,H1\n0,1\n1,abc\n", "line 3, column H1: 'abc' is not a number"),
        ("t,H1\n0,1\n1,2,3\n", "line 3: 3 fields"),
        ("t,H1\n0,1\n0.5,2\n0.5,3\n", "line 4: t = 0.5 does not increase"),
        ("t,H1,h1\n0,1,1\n1,2,2\n", "H1 appears twice"),
        ("t,P2\n0,1\n", "at least 2 are needed"),
        ("# only a comment\n", "empty"),
    ],
)
def test_malformed_experiment_file_is_refused(
    content: str,
    problem: str,
    spheric_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    args = [
        "validate",
        "spheric_test2",
        "--run",
        str(spheric_run),
        "--experiment",
        str(bad),
        "--out",
        str(tmp_path / "v"),
    ]
    assert dambreak(args) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and problem in err


def test_missing_experiment_file_and_semicolons(spheric_run: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no such file"):
        read_experiment_csv(tmp_path / "nope.csv")
    file = tmp_path / "semi.csv"
    file.write_text("Time;p3;H4\n0;1;\n1;2;\n")  # names match whatever their case
    t, series, ignored = read_experiment_csv(file)
    assert list(series) == ["P3"] and ignored == ["H4 (no values)"]
    assert t.tolist() == [0.0, 1.0]


def test_compare_series_peak_and_rms() -> None:
    t = np.linspace(0.0, 1.0, 101)
    result = compare_series(t, np.sin(np.pi * t), t[::2], np.sin(np.pi * t[::2]) + 0.1)
    assert result["rms_error"] == pytest.approx(0.1)
    assert result["peak_sim_time"] == pytest.approx(0.5) and result["peak_exp"] == pytest.approx(
        1.1
    )
