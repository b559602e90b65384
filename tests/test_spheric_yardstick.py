"""Tests of the SPHERIC test 2 yardstick (window means) and of the convergence mode
`dambreak validate spheric_test2 --runs ...`, on synthetic series and run folders.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from solver.cli import main as dambreak
from solver.config import load_config
from solver.validation.run_folder import write_run_folder
from solver.validation.spheric_metrics import (
    first_impact,
    height_metrics,
    paired_window_means,
    pressure_metrics,
    tension,
    window_means,
)

REPO = Path(__file__).resolve().parents[1]
HEIGHTS = [f"H{k}" for k in range(1, 5)]
PRESSURES = [f"P{k}" for k in range(1, 9)]
#: Samples at the middle of each millisecond, 0 to 3 s: every window holds whole samples.
T_MS = (np.arange(3000) + 0.5) * 1e-3


# ------------------------------------------------------------------------------ window means


def test_window_means_match_hand_computed_values() -> None:
    """Windows [k w, (k + 1) w) from t = 0; a sample on an edge (0.05, 0.15, which 0.15 / 0.05
    puts just below 3 in floating point) opens the window starting there; NaN samples are
    left out; windows without samples are absent."""
    t = np.array([0.0, 0.01, 0.02, 0.03, 0.05, 0.07, 0.15, 0.16])
    y = np.array([1.0, 2.0, 3.0, np.nan, 10.0, 20.0, 5.0, 7.0])
    windows, means = window_means(t, y, 0.05)
    assert windows.tolist() == [0, 1, 3]
    assert means.tolist() == pytest.approx([2.0, 15.0, 6.0])


def test_paired_windows_keep_the_common_span_and_windows_both_sample() -> None:
    """Only the span both cover counts, and only windows where both have samples: b starts at
    0.12 and has no sample in [0.2, 0.25)."""
    t_a = np.arange(0, 51) * 0.01  # 0 to 0.5
    t_b = np.array([0.12, 0.14, 0.17, 0.31, 0.33, 0.6])
    pairs = paired_window_means(t_a, t_a, t_b, 2 * t_b, 0.05)
    assert pairs.span == pytest.approx((0.12, 0.5))
    assert pairs.index.tolist() == [2, 3, 6]
    assert pairs.times == pytest.approx([0.125, 0.175, 0.325])
    # a's samples within the span: 0.12, 0.13, 0.14 in window 2; 0.15..0.19 in window 3
    assert pairs.a == pytest.approx([0.13, 0.17, 0.32])
    assert pairs.b == pytest.approx([0.26, 0.34, 0.64])


def test_sine_offset_gives_the_expected_rms_and_bias() -> None:
    """sim - exp = c + A sin(2 pi t) up to 2 s, then 0.1 more. Over a 50 ms window of 50
    mid-millisecond samples the mean of the sine is A sin(pi w) / (50 sin(pi 1e-3)) times its
    value at the window's centre; 20 windows a period sample sin^2 to 1/2 and sin to 0, so the
    first 2 s give RMS sqrt(c^2 + (F A)^2 / 2) and bias c, and the whole 3 s bias c + 0.1 / 3."""
    c, amplitude = 0.004, 0.03
    exp = 0.3 + 0.1 * np.cos(3.0 * T_MS)
    sim = exp + c + amplitude * np.sin(2 * np.pi * T_MS) + np.where(T_MS >= 2.0, 0.1, 0.0)
    result = height_metrics(T_MS, sim, T_MS, exp)
    factor = math.sin(math.pi * 0.05) / (50 * math.sin(math.pi * 1e-3))
    early = result["first_2s"]
    assert early["windows"] == 40 and result["windows"] == 60
    assert early["rms"] == pytest.approx(math.sqrt(c**2 + (factor * amplitude) ** 2 / 2), rel=1e-9)
    assert early["bias"] == pytest.approx(c, abs=1e-12)
    assert result["bias"] == pytest.approx(c + 0.1 / 3, abs=1e-12)
    assert result["window_s"] == 0.05 and result["span_s"] == pytest.approx([5e-4, 2.9995])


def test_pressure_peak_time_level_and_minimum_of_window_means() -> None:
    """exp: a 5000 Pa pulse centred on the window [0.50, 0.52), then 500 Pa from 1 s; sim: the
    pulse 1.2 times higher and 0.04 s later, 400 Pa from 1 s, -300 Pa in [0.80, 0.82).
    Peaks are window means at window centres; the level is the mean within 1 to 3 s."""

    def pulse(centre: float) -> np.ndarray:
        return np.exp(-(((T_MS - centre) / 0.005) ** 2))

    plateau = T_MS >= 1.0
    exp = 5000.0 * pulse(0.51) + np.where(plateau, 500.0, 0.0)
    sim = 6000.0 * pulse(0.55) + np.where(plateau, 400.0, 0.0)
    sim[(T_MS >= 0.80) & (T_MS < 0.82)] = -300.0
    r = pressure_metrics(T_MS, sim, T_MS, exp)
    assert r["window_s"] == 0.02 and r["windows"] == 150
    window_mean = float(np.mean(5000.0 * pulse(0.51)[500:520]))  # exp's window [0.50, 0.52)
    assert r["peak_exp"] == pytest.approx(window_mean, rel=1e-9)
    assert r["peak_sim"] == pytest.approx(1.2 * window_mean, rel=1e-9)
    assert r["peak_exp_time"] == pytest.approx(0.51) and r["peak_sim_time"] == pytest.approx(0.55)
    assert r["peak_ratio"] == pytest.approx(1.2, rel=1e-9)
    assert r["peak_time_difference"] == pytest.approx(0.04)
    assert r["level_windows"] == 100
    assert r["level_sim"] == pytest.approx(400.0) and r["level_exp"] == pytest.approx(500.0)
    assert r["level_ratio"] == pytest.approx(0.8)
    assert r["min_sim"] == pytest.approx(-300.0) and r["min_exp"] == pytest.approx(0.0, abs=1e-9)
    # First impacts: the first samples at or above 1 kPa (exp: 0.5045 s, the pulse above a
    # fifth of its height; sim: 0.5435 s, above a sixth); the impulse of a Gaussian
    # A exp(-((t - c) / s)^2) from a on (100 ms is practically infinity) is
    # A s sqrt(pi) / 2 erfc((a - c) / s).
    assert r["arrival_exp"] == pytest.approx(0.5045) and r["arrival_sim"] == pytest.approx(0.5435)
    assert r["arrival_difference"] == pytest.approx(0.039)

    def tail(height: float, start: float, centre: float) -> float:
        return height * 0.005 * math.sqrt(math.pi) / 2 * math.erfc((start - centre) / 0.005)

    assert r["impulse_exp"] == pytest.approx(tail(5000.0, 0.5045, 0.51), rel=2e-3)
    assert r["impulse_sim"] == pytest.approx(tail(6000.0, 0.5435, 0.55), rel=2e-3)
    assert r["impulse_ratio"] == pytest.approx(r["impulse_sim"] / r["impulse_exp"])


def test_first_impact_integrates_pressure_from_the_arrival() -> None:
    """The arrival is the first sample at or above 1 kPa; the impulse integrates 100 ms from it
    by the trapezoidal rule, exactly for a linear series, with the end value interpolated
    between unevenly spaced samples."""
    t = np.arange(1001) * 1e-3  # 0 to 1 s
    arrival, impulse = first_impact(t, 1e4 * t + 5.0)  # reaches 1 kPa at 0.0995 s: sample 0.1
    assert arrival == pytest.approx(0.1)
    assert impulse == pytest.approx(1e4 * (0.2**2 - 0.1**2) / 2 + 5.0 * 0.1, rel=1e-12)
    box = np.where((t >= 0.3 - 1e-12) & (t < 0.35 - 1e-12), 3000.0, 0.0)  # 0.300 to 0.349 s
    assert first_impact(t, box) == pytest.approx((0.3, 3000.0 * 0.049 + 1500.0 * 0.001))
    uneven = np.array([0.0, 0.05, 0.12, 0.3])
    assert first_impact(uneven, np.array([0.0, 2000.0, 2000.0, 2000.0])) == pytest.approx(
        (0.05, 200.0)
    )
    assert first_impact(t, np.full(t.size, 999.0)) == (None, None)  # never reached
    arrival, impulse = first_impact(t, np.where(t >= 0.95, 2000.0, 0.0))  # too close to the end
    assert arrival == pytest.approx(0.95) and impulse is None
    with_nan = 1e4 * t + 5.0
    with_nan[100] = np.nan  # a missing sample is skipped: the arrival moves to 0.101 s
    assert first_impact(t, with_nan)[0] == pytest.approx(0.101)


def test_tension_is_the_smallest_window_and_the_time_below_minus_100_pa() -> None:
    """A 1 kPa series with a -500 Pa dip over [0.40, 0.44) and a -50 Pa one over [0.80, 0.90):
    the smallest 20 ms window mean is -500 Pa in the window centred on 0.41 s, and only the
    dip's two windows count as tension (the shallow one is above -100 Pa)."""
    p = np.full_like(T_MS, 1000.0)
    p[(T_MS >= 0.40) & (T_MS < 0.44)] = -500.0
    p[(T_MS >= 0.80) & (T_MS < 0.90)] = -50.0
    result = tension(T_MS, p)
    assert result["smallest"] == pytest.approx(-500.0)
    assert result["at"] == pytest.approx(0.41)
    assert result["seconds"] == pytest.approx(0.04)
    assert tension(T_MS, np.full_like(T_MS, 1000.0))["seconds"] == 0.0
    assert tension(np.array([]), np.array([])) == {"smallest": None, "at": None, "seconds": 0.0}


def test_series_that_do_not_overlap_give_no_numbers() -> None:
    result = pressure_metrics(np.array([0.0, 1.0]), np.ones(2), np.array([2.0, 3.0]), np.ones(2))
    assert result["windows"] == 0 and result["span_s"] is None
    assert result["rms"] is None and result["peak_ratio"] is None and result["level_ratio"] is None
    assert result["impulse_sim"] is None and result["impulse_ratio"] is None


# ------------------------------------------------------------------------------ one run


def test_gauge_and_sensor_variants_are_compared_with_their_measured_series(
    tmp_path: Path,
) -> None:
    """Columns H1_swl and H1_top (other definitions of gauge H1) are kept, plotted with H1 and
    compared with the measured H1: their yardstick bias is their offset from it; P1_face
    (another reading of sensor P1) likewise with the measured P1."""
    cfg = load_config(REPO / "configs" / "spheric_test2.toml", ["particles.dp=0.1"])
    series = {
        "H1": limit("H1", T_MS),
        "H1_swl": limit("H1", T_MS) + 0.01,
        "P1": limit("P1", T_MS),
        "H1_top": limit("H1", T_MS) - 0.02,
        "P1_face": limit("P1", T_MS) + 100.0,
    }
    run = write_run_folder(tmp_path / "run", cfg, [], probes=(T_MS, series))
    experiment = tmp_path / "measured.csv"
    columns = zip(
        T_MS.tolist(), limit("H1", T_MS).tolist(), limit("P1", T_MS).tolist(), strict=True
    )
    rows = "\n".join(f"{t!r},{h!r},{p!r}" for t, h, p in columns)
    experiment.write_text("t,H1,P1\n" + rows + "\n")
    out = tmp_path / "v"
    args = ["validate", "spheric_test2", "--run", str(run), "--out", str(out)]
    assert dambreak([*args, "--experiment", str(experiment)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["series"] == ["H1", "H1_swl", "H1_top", "P1", "P1_face"]
    yardstick = report["yardstick"]
    assert list(yardstick) == ["H1", "H1_swl", "H1_top", "P1", "P1_face"]
    assert [yardstick[n]["reference"] for n in yardstick] == ["H1"] * 3 + ["P1"] * 2
    for name, offset in (("H1", 0.0), ("H1_swl", 0.01), ("H1_top", -0.02)):
        assert yardstick[name]["bias"] == pytest.approx(offset, abs=1e-12)
        assert yardstick[name]["rms"] == pytest.approx(abs(offset), abs=1e-12)
        assert report["comparison"][name]["rms_error"] == pytest.approx(abs(offset), abs=1e-12)
    assert yardstick["P1"]["rms"] == pytest.approx(0.0, abs=1e-9)
    assert yardstick["P1_face"]["rms"] == pytest.approx(100.0, rel=1e-9)
    report_md = (out / "report.md").read_text()
    assert "| H1_swl (vs H1) |" in report_md and "| P1_face (vs P1) |" in report_md
    header = (out / "spheric_series.csv").read_text().splitlines()[0]
    assert header == "t,H1,H1_swl,H1_top,P1,P1_face"


# ------------------------------------------------------------------------------ convergence


def limit(name: str, t: np.ndarray) -> np.ndarray:
    """The converged series: heights oscillate, pressures pulse at 0.5 s."""
    k = int(name[1])
    if name.startswith("H"):
        return 0.1 * k + 0.05 * np.sin(2 * np.pi * t)
    return 1000.0 * k * np.exp(-(((t - 0.5) / 0.05) ** 2)) + 300.0


def make_run(
    path: Path,
    dp: float,
    *,
    names: list[str] | None = None,
    case: str = "spheric_test2",
    t: np.ndarray = T_MS,
    departs_after: float = math.inf,
    overrides: tuple[str, ...] = (),
) -> Path:
    """A spheric_test2 run folder at `dp` whose series are the limit plus dp (heights, m) or
    1000 dp (pressures, Pa), and 1 m (1 kPa) more after `departs_after` [s], with a
    summary.json like `dambreak run` writes; `overrides` change its config further."""
    cfg = load_config(
        REPO / "configs" / "spheric_test2.toml",
        [f"particles.dp={dp}", f"case.name={case}", *overrides],
    )
    names = names if names is not None else HEIGHTS + PRESSURES
    departure = np.where(t > departs_after, 1.0, 0.0)
    series = {
        n: limit(n, t) + (dp + departure if n.startswith("H") else 1000.0 * (dp + departure))
        for n in names
    }
    fluid = round(1e-3 / dp**3)
    summary = {
        "case": case,
        "particles": {"fluid": fluid, "wall": 2 * fluid, "obstacle": 7, "total": 3 * fluid + 7},
        "steps": round(10 / dp),
        "wall_time_s": 2.5,
        "particle_steps_per_second": 1.25e6,
        "removed": 3,
        "removed_by_reason": {"outside_domain": 2, "density_out_of_band": 1},
    }
    return write_run_folder(path, cfg, [], probes=(t, series), summary=summary)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three resolutions, coarse to fine: dp = 0.04, 0.02, 0.01."""
    base = tmp_path_factory.mktemp("convergence")
    return [make_run(base / f"dp{dp}", dp) for dp in (0.04, 0.02, 0.01)]


def test_convergence_differences_shrink_for_converging_runs(
    runs: list[Path], tmp_path: Path
) -> None:
    """Series converging as dp: successive window-mean differences are 0.02 then 0.01 m for
    heights (20 then 10 Pa for pressures), ratio 1/2, flagged as shrinking; the table of runs
    shows dp, particles, steps, speed and removals from summary.json."""
    out = tmp_path / "report"
    assert (
        dambreak(["validate", "spheric_test2", "--runs", *map(str, runs), "--out", str(out)]) == 0
    )
    for name in ("report.md", "report.json", "heights.png", "pressures.png"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert [r["dp"] for r in report["runs"]] == [0.04, 0.02, 0.01]
    assert report["runs"][2]["fluid_particles"] == 1000 and report["runs"][2]["particles"] == 3007
    assert report["runs"][0]["removed_by_reason"] == {"outside_domain": 2, "density_out_of_band": 1}
    differences = report["successive_differences"]
    assert list(differences) == HEIGHTS + PRESSURES
    for name, entry in differences.items():
        scale = 1.0 if name.startswith("H") else 1000.0
        assert [p["rms"] for p in entry["pairs"]] == pytest.approx([0.02 * scale, 0.01 * scale])
        assert [(p["coarse"], p["fine"]) for p in entry["pairs"]] == [("#1", "#2"), ("#2", "#3")]
        assert entry["pairs"][0]["window_s"] == (0.05 if name.startswith("H") else 0.02)
        assert entry["ratios"] == pytest.approx([0.5]) and entry["shrinking"] is True
    text = (out / "report.md").read_text()
    assert "| #3 | " in text and "removed: density_out_of_band" in text
    assert "| H1 | m | 50 | 0.02 | 0.01 | 0.5 | yes |" in text
    assert report["yardstick"] == {}
    # The shipped config fits its lattice to the reservoir: no water is built off its block.
    assert not [n for n in report["notes"] if "is built as" in n]
    impulses = report["impulses"]
    assert list(impulses) == PRESSURES
    for name, entry in impulses.items():
        expected = [
            first_impact(T_MS, limit(name, T_MS) + 1000.0 * dp) for dp in (0.04, 0.02, 0.01)
        ]
        assert [r["label"] for r in entry["runs"]] == ["#1", "#2", "#3"]
        assert [(r["arrival"], r["impulse"]) for r in entry["runs"]] == pytest.approx(expected)
        impulse = [i for _, i in expected]
        steps = [abs(impulse[1] - impulse[0]), abs(impulse[2] - impulse[1])]
        assert entry["differences"] == pytest.approx(steps)
        assert entry["shrinking"] is (steps[1] < steps[0])
    # P1's pulse (1000 Pa high, on 300 + 1000 dp) reaches 1 kPa later the finer the run.
    assert impulses["P1"]["runs"][0]["arrival"] < impulses["P1"]["runs"][2]["arrival"]
    assert "## First impact: pressure impulse" in text
    # No series goes below its 300 Pa floor: the smallest window is 300 + 1000 dp Pa, away from
    # the pulse, and no time is spent in tension.
    tensions = report["tension"]
    assert list(tensions) == PRESSURES
    for entry in tensions.values():
        assert [r["label"] for r in entry] == ["#1", "#2", "#3"]
        assert [r["smallest"] for r in entry] == pytest.approx([340.0, 320.0, 310.0])
        assert [r["seconds"] for r in entry] == [0.0, 0.0, 0.0]
    assert "## Tension" in text


def test_convergence_report_notes_water_the_dp_lattice_builds_off_its_block(
    tmp_path: Path,
) -> None:
    """On the dp lattice the 0.55 m reservoir starts 0.56 m deep at dp 0.04 and 0.02, 0.55 m at
    0.01: the report notes the two runs whose water differs from the block."""
    dp_lattice = ("particles.fluid_lattice=dp",)
    runs = [make_run(tmp_path / f"dp{dp}", dp, overrides=dp_lattice) for dp in (0.04, 0.02, 0.01)]
    out = tmp_path / "report"
    assert (
        dambreak(["validate", "spheric_test2", "--runs", *map(str, runs), "--out", str(out)]) == 0
    )
    report = json.loads((out / "report.json").read_text())
    depth = [n for n in report["notes"] if "along z is built as" in n]
    assert len(depth) == 2 and "28 layers of dp = 0.02 m, [0, 0.56] m" in depth[1]


def test_convergence_with_experiment_gives_each_runs_yardstick(
    runs: list[Path], tmp_path: Path
) -> None:
    """Measured = the limit: each run's height bias is its dp, its pressure RMS 1000 dp and its
    level ratio (300 + 1000 dp) / 300."""
    experiment = tmp_path / "measured.csv"
    t = T_MS[:2500]  # to 2.5 s
    columns = zip(t.tolist(), limit("H2", t).tolist(), limit("P1", t).tolist(), strict=True)
    rows = [f"{x!r},{h!r},{p!r}" for x, h, p in columns]
    experiment.write_text("t,H2,P1\n" + "\n".join(rows) + "\n")
    out = tmp_path / "report"
    args = ["validate", "spheric_test2", "--runs", *map(str, runs), "--out", str(out)]
    assert dambreak([*args, "--experiment", str(experiment)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert list(report["yardstick"]) == ["#1", "#2", "#3"]
    for label, dp in (("#1", 0.04), ("#2", 0.02), ("#3", 0.01)):
        ys = report["yardstick"][label]
        assert list(ys) == ["H2", "P1"]
        assert ys["H2"]["bias"] == pytest.approx(dp, rel=1e-9)
        assert ys["P1"]["rms"] == pytest.approx(1000.0 * dp, rel=1e-9)
        assert ys["P1"]["level_ratio"] == pytest.approx((300 + 1000 * dp) / 300, rel=1e-6)
    assert "in the run but not measured: H1, H3, H4, P2," in report["notes"][0]
    assert "| P1 | #3 |" in (out / "report.md").read_text()


def test_convergence_until_compares_the_first_seconds_alone(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--until 1.5: a finest run that departs from the limit by 1 m (1 kPa) after 1.5 s is
    compared over [0, 1.5] alone, where the differences are the exact 0.02 then 0.01; without
    --until the departure shows. --until without --runs, or not positive, is refused."""
    departing = make_run(tmp_path / "dp0.01_departs", 0.01, departs_after=1.5)
    folders = [*map(str, runs[:2]), str(departing)]
    out = tmp_path / "report"
    args = ["validate", "spheric_test2", "--runs", *folders, "--out", str(out)]
    assert dambreak([*args, "--until", "1.5"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["until_s"] == 1.5
    assert [r["probe_end_time"] for r in report["runs"]] == pytest.approx([1.4995] * 3)
    for name, entry in report["successive_differences"].items():
        scale = 1.0 if name.startswith("H") else 1000.0
        assert [p["rms"] for p in entry["pairs"]] == pytest.approx([0.02 * scale, 0.01 * scale])
    assert "compared over their first 1.5 s (--until)" in (out / "report.md").read_text()
    assert dambreak([*args, "--force"]) == 0
    whole = json.loads((out / "report.json").read_text())
    assert whole["until_s"] is None
    assert whole["successive_differences"]["H1"]["pairs"][1]["rms"] > 0.5
    capsys.readouterr()
    assert dambreak(["validate", "spheric_test2", "--run", str(runs[0]), "--until", "1"]) == 2
    assert "--until is for a convergence study" in capsys.readouterr().err
    assert dambreak([*args, "--force", "--until", "0"]) == 2
    assert "--until 0: must be a time > 0 s" in capsys.readouterr().err


def test_convergence_refuses_a_non_empty_report_folder_without_force(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    args = ["validate", "spheric_test2", "--runs", *map(str, runs[:2]), "--out", str(out)]
    assert dambreak(args) == 2
    assert f"{out} is not empty" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert dambreak([*args, "--force"]) == 0
    assert (out / "report.md").is_file() and (out / "keep.txt").is_file()


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda base: [make_run(base / "a", 0.04), base / "empty"], "not a run folder"),
        (
            lambda base: [make_run(base / "a", 0.04), make_run(base / "b", 0.02, case="other")],
            "case 'other'",
        ),
        (
            lambda base: [make_run(base / "a", 0.04), make_run(base / "b", 0.02, names=HEIGHTS)],
            "missing: P1, P2",
        ),
        (
            lambda base: [make_run(base / "a", 0.02), make_run(base / "b", 0.04)],
            "dp = 0.04 m is not smaller than dp = 0.02 m",
        ),
        (
            lambda base: [make_run(base / "a", 0.04), make_run(base / "b", 0.02, t=T_MS[:1])],
            "fewer than 2 samples",
        ),
    ],
    ids=["not-a-run", "other-case", "other-probes", "fine-to-coarse", "no-samples"],
)
def test_convergence_refuses_bad_runs_naming_the_folder(
    build: Callable[[Path], list[Path]],
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    """A folder that is not a run, another case, other probes, dp not decreasing, a run
    without samples: exit 2 with a message naming the offending (second) folder, nothing
    written."""
    base = tmp_path / "runs"
    (base / "empty").mkdir(parents=True)
    folders = build(base)
    out = tmp_path / "report"
    args = ["validate", "spheric_test2", "--runs", *map(str, folders), "--out", str(out)]
    assert dambreak(args) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert str(folders[1]) in err
    assert not out.exists()


def test_convergence_needs_two_runs_and_an_out_folder(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """One run, or no --out: exit 2 with the reason, nothing written."""
    out = tmp_path / "x"
    assert dambreak(["validate", "spheric_test2", "--runs", str(runs[0]), "--out", str(out)]) == 2
    assert "at least 2 run folders" in capsys.readouterr().err
    assert dambreak(["validate", "spheric_test2", "--runs", *map(str, runs[:2])]) == 2
    assert "--runs needs --out DIR" in capsys.readouterr().err
    assert not out.exists()
