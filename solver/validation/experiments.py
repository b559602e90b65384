"""`dambreak validate CASE`: a run of a reference case against experiments.

column_collapse (Martin & Moyce 1952, n^2 = 2; Koshizuka & Oka 1996; cases.md, section 3)
    a = the x extent of the first fluid block (the column width), n^2 a its height.
    Front: Z = (x_front - x_back) / a against T = t sqrt(2 g / a), x_front from
    `metrics.front_position` (99.5th percentile of x among fluid particles less than 2 dp above
    the floor) and x_back the tank's back wall (tank min x). Residual height at the back wall:
    H = h / (n^2 a) (= h / (2a) for n^2 = 2) against tau = t sqrt(g / a), h from
    `metrics.back_wall_height` (the top of the unbroken stack of fluid particles less than 2 dp
    from the back wall). The simulation is interpolated linearly onto the table's times; mean
    and max |Z_sim - Z_exp| are taken over the table rows the run covers.
    SPH fronts lead the experiment early on, because the real gate takes time to lift; the
    gate-release offset dT in [0, 0.3] (T units) that minimises the mean error is searched
    and the shifted numbers are reported next to the raw ones, labelled as shifted. The verdict
    uses the raw numbers only: exit 0 when the raw mean |Z_sim - Z_exp| against Martin & Moyce
    is at most 0.15 over the whole table, 1 otherwise.

spheric_test2 (Kleefsman et al. 2005; cases.md, section 2)
    One run's water heights and pressures against a measurement (`spheric.validate_spheric`),
    or, with --runs, runs at successive resolutions against each other and the measurement
    (`convergence.validate_convergence`). The yardstick: `spheric_metrics`. There is no pass
    threshold: the exit status is 0 unless something cannot be read (2).

Exit status 2 for anything that cannot be validated: an unreadable run, a malformed experiment
file, a run without the data needed.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solver.validation.metrics import (
    DEFAULT_FRONT_BAND_DP,
    DEFAULT_FRONT_PERCENTILE,
    back_wall_height,
    fluid_mask,
    front_position,
)
from solver.validation.plots import fmt, markdown_table, write_json, write_report_md
from solver.validation.run_folder import RunFolder, RunFolderError

__all__ = [
    "CASES",
    "DATA_DIR",
    "MARTIN_MOYCE_THRESHOLD",
    "ValidationError",
    "add_arguments",
    "column_collapse_series",
    "compare_to_table",
    "main",
    "read_reference_table",
    "validate_column_collapse",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Experimental tables shipped with the project (each file's header names its source).
DATA_DIR = REPO_ROOT / "validation" / "data"
CONFIG_DIR = REPO_ROOT / "configs"

CASES: tuple[str, ...] = ("column_collapse", "spheric_test2")

MARTIN_MOYCE_FRONT = "martin_moyce_1952_n2_2_front.csv"
MARTIN_MOYCE_HEIGHT = "martin_moyce_1952_n2_2_height.csv"
KOSHIZUKA_OKA_FRONT = "koshizuka_oka_1996_exp_front.csv"

#: Largest raw mean |Z_sim - Z_exp| against Martin & Moyce's front that passes (issue 4).
MARTIN_MOYCE_THRESHOLD = 0.15
#: Gate-release offsets searched, in T = t sqrt(2 g / a) units: 0 to 0.3 by 0.005.
OFFSET_GRID_T = np.round(np.arange(0.0, 0.3 + 1e-12, 0.005), 6)


class ValidationError(Exception):
    """The run cannot be validated (missing data, wrong case); the message says why."""


# ------------------------------------------------------------------------------ tables


def read_reference_table(path: Path) -> dict[str, np.ndarray]:
    """A reference CSV of validation/data: '#' comment lines (the source), a header, numbers."""
    lines = [
        line
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    header = [name.strip() for name in lines[0].split(",")]
    values = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    return {name: values[:, k] for k, name in enumerate(header)}


def _sim_at(x_sim: np.ndarray, y_sim: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The simulation's y at `x` by linear interpolation; before its start, its first value
    (the column at rest before the release), NaN after its end."""
    y = np.interp(x, x_sim, y_sim, left=y_sim[0])
    return np.where(x > x_sim[-1] + 1e-12, np.nan, y)


def _errors(
    x_sim: np.ndarray, y_sim: np.ndarray, x_exp: np.ndarray, y_exp: np.ndarray, offset: float
) -> dict[str, Any]:
    """Mean and max |y_sim(x - offset) - y_exp| over the table rows the simulation covers."""
    y = _sim_at(x_sim, y_sim, x_exp - offset)
    ok = np.isfinite(y) & np.isfinite(y_exp)
    diff = np.abs(y[ok] - y_exp[ok])
    return {
        "offset": float(offset),
        "points": int(np.count_nonzero(ok)),
        "table_points": int(x_exp.size),
        "covered": bool(np.count_nonzero(ok) == x_exp.size),
        "mean_abs_error": float(np.mean(diff)) if diff.size else None,
        "max_abs_error": float(np.max(diff)) if diff.size else None,
    }


def compare_to_table(
    x_sim: np.ndarray,
    y_sim: np.ndarray,
    x_exp: np.ndarray,
    y_exp: np.ndarray,
    offsets: np.ndarray,
) -> dict[str, Any]:
    """Raw and best-shifted errors of a simulated curve against a table.

    `raw` compares y_sim(x) with the table; `shifted` is the best of y_sim(x - offset) over
    `offsets` (the smallest mean error; the smallest offset among equals), i.e. the simulation
    delayed by the offset, as a late gate release would do.
    """
    x_sim = np.asarray(x_sim, dtype=np.float64)
    y_sim = np.asarray(y_sim, dtype=np.float64)
    x_exp = np.asarray(x_exp, dtype=np.float64)
    y_exp = np.asarray(y_exp, dtype=np.float64)
    raw = _errors(x_sim, y_sim, x_exp, y_exp, 0.0)
    best = raw
    for offset in offsets:
        trial = _errors(x_sim, y_sim, x_exp, y_exp, float(offset))
        if trial["mean_abs_error"] is not None and (
            best["mean_abs_error"] is None or trial["mean_abs_error"] < best["mean_abs_error"]
        ):
            best = trial
    return {"raw": raw, "shifted": best}


# ------------------------------------------------------------------------------ column collapse


@dataclass
class CollapseSeries:
    """The column-collapse quantities of a run, at its snapshot times."""

    a: float
    n2: float
    gravity: float
    t: np.ndarray
    front: np.ndarray
    height: np.ndarray
    front_all: np.ndarray
    gauge_t: np.ndarray | None = None
    gauge_height: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def T(self) -> np.ndarray:  # noqa: N802 - Martin & Moyce's symbol
        """Dimensionless time of the front, t sqrt(2 g / a)."""
        return self.t * math.sqrt(2.0 * self.gravity / self.a)

    @property
    def tau(self) -> np.ndarray:
        """Dimensionless time of the height, t sqrt(g / a)."""
        return self.t * math.sqrt(self.gravity / self.a)

    @property
    def Z(self) -> np.ndarray:  # noqa: N802 - Martin & Moyce's symbol
        """Front position over the column width."""
        return self.front / self.a

    @property
    def H(self) -> np.ndarray:  # noqa: N802 - Martin & Moyce's symbol
        """Height at the back wall over the initial column height n^2 a."""
        return self.height / (self.n2 * self.a)

    @property
    def Z_all(self) -> np.ndarray:  # noqa: N802 - Martin & Moyce's symbol
        """Diagnostic front over the column width, from the fluid at any height."""
        return self.front_all / self.a


def column_collapse_series(
    run: RunFolder,
    *,
    front_percentile: float = DEFAULT_FRONT_PERCENTILE,
    front_band_dp: float = DEFAULT_FRONT_BAND_DP,
) -> CollapseSeries:
    """Front and back-wall height of a column-collapse run at every snapshot.

    Also a diagnostic front, `front_all`: the same percentile of x over all fluid particles,
    whatever their height. It tells a front that runs above the floor (a stuck bottom layer, a
    wall gap wider than the band) from one that is really late or early.
    """
    cfg = run.config
    if run.snapshot_count < 2:
        raise ValidationError(
            f"{run.path}: the run needs at least 2 snapshots, it has {run.snapshot_count}"
        )
    block = cfg.fluid_blocks[0]
    a = block.size[0]
    n2 = block.size[2] / a
    back_x = cfg.tank.box.min[0]
    floor = cfg.tank.box.min[2]
    notes = []
    if abs(n2 - 2.0) > 0.05:
        notes.append(f"the column's height is {n2:.3g} a; the tables are for n^2 = 2")
    if abs(block.min[0] - back_x) > 0.5 * cfg.dp:
        notes.append("the first fluid block does not start at the back wall (tank min x)")
    fronts, heights, fronts_all = [], [], []
    for snap in run.snapshots():
        position = np.asarray(snap.position, dtype=np.float64)[fluid_mask(snap)]
        front = front_position(
            position, floor, cfg.dp, percentile=front_percentile, band_dp=front_band_dp
        )
        fronts.append(front - back_x)
        heights.append(back_wall_height(position, back_x, floor, cfg.dp))
        any_x = np.percentile(position[:, 0], front_percentile) if len(position) else math.nan
        fronts_all.append(float(any_x) - back_x)
    series = CollapseSeries(
        a=a,
        n2=n2,
        gravity=cfg.gravity_magnitude,
        t=run.times,
        front=np.array(fronts),
        height=np.array(heights),
        front_all=np.array(fronts_all),
        notes=notes,
    )
    gauges = [g for g in cfg.probes.heights if abs(g.x - back_x) < 2.0 * cfg.dp]
    if gauges and run.has_probes:
        t_probe, probes = run.probes()
        name = gauges[0].name
        if name in probes and t_probe.size:
            series.gauge_t = t_probe
            series.gauge_height = probes[name] - floor
    return series


_TABLE_COLUMNS = [
    "comparison",
    "rows used",
    "mean abs err (raw)",
    "max abs err (raw)",
    "offset applied",
    "mean abs err (shifted)",
    "max abs err (shifted)",
]
"""Columns of the column-collapse report's tables."""


def _collapse_report_rows(results: dict[str, dict[str, Any]], unit: str) -> list[list[Any]]:
    """Table rows: raw and shifted errors of each comparison."""
    rows = []
    for label, result in results.items():
        raw, shifted = result["raw"], result["shifted"]
        rows.append(
            [
                label,
                f"{raw['points']} / {raw['table_points']}",
                raw["mean_abs_error"],
                raw["max_abs_error"],
                f"{shifted['offset']:.3g} {unit}",
                shifted["mean_abs_error"],
                shifted["max_abs_error"],
            ]
        )
    return rows


def validate_column_collapse(
    run: RunFolder,
    out_dir: Path,
    *,
    front_percentile: float = DEFAULT_FRONT_PERCENTILE,
    front_band_dp: float = DEFAULT_FRONT_BAND_DP,
) -> int:
    """Compare a column-collapse run with Martin & Moyce and Koshizuka & Oka (module doc)."""
    from solver.validation.plots import pyplot, save_figure

    series = column_collapse_series(
        run, front_percentile=front_percentile, front_band_dp=front_band_dp
    )
    mm_front = read_reference_table(DATA_DIR / MARTIN_MOYCE_FRONT)
    ko_front = read_reference_table(DATA_DIR / KOSHIZUKA_OKA_FRONT)
    mm_height = read_reference_table(DATA_DIR / MARTIN_MOYCE_HEIGHT)
    offsets_tau = OFFSET_GRID_T / math.sqrt(2.0)
    seconds_per_T = 1.0 / math.sqrt(2.0 * series.gravity / series.a)

    fronts = {
        "Martin & Moyce 1952, front": compare_to_table(
            series.T, series.Z, mm_front["T"], mm_front["Z"], OFFSET_GRID_T
        ),
        "Koshizuka & Oka 1996, front": compare_to_table(
            series.T, series.Z, ko_front["T"], ko_front["Z"], OFFSET_GRID_T
        ),
    }
    diagnostics = {
        "Martin & Moyce 1952, front of the fluid at any height": compare_to_table(
            series.T, series.Z_all, mm_front["T"], mm_front["Z"], OFFSET_GRID_T
        ),
    }
    heights = {
        "Martin & Moyce 1952, height": compare_to_table(
            series.tau, series.H, mm_height["tau"], mm_height["H"], offsets_tau
        ),
    }
    if series.gauge_t is not None and series.gauge_height is not None:
        tau_gauge = series.gauge_t * math.sqrt(series.gravity / series.a)
        h_gauge = series.gauge_height / (series.n2 * series.a)
        heights["Martin & Moyce 1952, height (gauge)"] = compare_to_table(
            tau_gauge, h_gauge, mm_height["tau"], mm_height["H"], offsets_tau
        )

    mm = fronts["Martin & Moyce 1952, front"]["raw"]
    reasons = []
    if mm["mean_abs_error"] is None:
        reasons.append("the run covers none of Martin & Moyce's front table")
    elif not mm["covered"]:
        reasons.append(
            f"the run covers {mm['points']} of the {mm['table_points']} rows of Martin & Moyce's "
            f"front table (it ends at T = {series.T[-1]:.3g}); the criterion needs all"
        )
    elif mm["mean_abs_error"] > MARTIN_MOYCE_THRESHOLD:
        reasons.append(
            f"raw mean |Z_sim - Z_exp| = {mm['mean_abs_error']:.3g} > {MARTIN_MOYCE_THRESHOLD:g}"
        )
    passed = not reasons
    mm_shift = fronts["Martin & Moyce 1952, front"]["shifted"]

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(series.T, series.Z, "-", label="simulation (no time offset)")
    ax.plot(
        series.T,
        series.Z_all,
        "--",
        color="0.6",
        lw=1,
        label="diagnostic: front of the fluid at any height",
    )
    if mm_shift["offset"] > 0.0:
        ax.plot(
            np.r_[0.0, series.T + mm_shift["offset"]],
            np.r_[series.Z[0], series.Z],
            ":",
            label=f"simulation delayed by dT = {mm_shift['offset']:g} (gate-release offset)",
        )
    ax.plot(mm_front["T"], mm_front["Z"], "o", mfc="none", label="Martin & Moyce 1952, n^2 = 2")
    ax.plot(ko_front["T"], ko_front["Z"], "s", mfc="none", label="Koshizuka & Oka 1996")
    ax.set_xlim(0.0, max(float(series.T[-1]), float(mm_front["T"][-1])) * 1.05)
    ax.set_xlabel("T = t sqrt(2 g / a)")
    ax.set_ylabel("Z = x_front / a")
    ax.set_title(
        f"surge front; raw mean |dZ| vs Martin & Moyce = {fmt(mm['mean_abs_error'], 3)}", fontsize=9
    )
    ax.legend(fontsize=8)
    figures = [save_figure(fig, out_dir / "front.png")]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(series.tau, series.H, "-", label="simulation, particles at the back wall")
    if series.gauge_t is not None and series.gauge_height is not None:
        ax.plot(
            series.gauge_t * math.sqrt(series.gravity / series.a),
            series.gauge_height / (series.n2 * series.a),
            "--",
            lw=1,
            label="simulation, height gauge at the back wall",
        )
    ax.plot(mm_height["tau"], mm_height["H"], "o", mfc="none", label="Martin & Moyce 1952")
    ax.set_xlabel("tau = t sqrt(g / a)")
    ax.set_ylabel("H = h / (2a)")
    ax.set_title("residual height of the column at the back wall", fontsize=9)
    ax.legend(fontsize=8)
    figures.append(save_figure(fig, out_dir / "height.png"))

    lines = [
        "# Validation: collapse of a water column",
        "",
        f"Run `{run.path}` (case {run.config.name!r}); column width a = {series.a:g} m, "
        f"height {series.n2:.3g} a, g = {series.gravity:g} m/s^2, dp = {run.config.dp:g} m "
        f"(a / dp = {series.a / run.config.dp:.3g}); {len(series.t)} snapshots up to "
        f"T = {series.T[-1]:.3g}.",
        "",
        f"## Verdict: {'PASS' if passed else 'FAIL'} (exit status {0 if passed else 1})",
        "",
        f"Criterion: raw (no time offset) mean |Z_sim - Z_exp| against Martin & Moyce's front "
        f"<= {MARTIN_MOYCE_THRESHOLD:g} over the whole table.",
        "",
    ]
    lines += [f"- {reason}" for reason in reasons] or [
        f"- raw mean |Z_sim - Z_exp| = {mm['mean_abs_error']:.3g}"
    ]
    lines += [
        "",
        "## Front Z = x_front / a against T = t sqrt(2 g / a)",
        "",
        'The "shifted" columns apply a gate-release time offset: the simulation is delayed by '
        "dT (searched in 0..0.3, the value minimising the mean error; "
        f"1 T = {seconds_per_T:.4g} s). The raw columns apply no offset.",
        "",
        markdown_table(
            _TABLE_COLUMNS,
            _collapse_report_rows(fronts, "T"),
        ),
        "",
        f"x_front: the {front_percentile:g}th percentile of x among fluid particles less than "
        f"{front_band_dp:g} dp above the floor.",
        "",
        "## Residual height H = h / (2a) against tau = t sqrt(g / a)",
        "",
        "h: the top of the unbroken stack of fluid particles within 2 dp of the back wall"
        + (' ("gauge": the run\'s height gauge there).' if len(heights) > 1 else "."),
        "",
        markdown_table(
            _TABLE_COLUMNS,
            _collapse_report_rows(heights, "tau"),
        ),
        "",
        "## Diagnostic (not part of the verdict)",
        "",
        f"The front taken over the fluid at any height ({front_percentile:g}th percentile of x "
        "of all fluid particles). Where it runs well ahead of the near-floor front, the water "
        "flows above the floor band (a bottom layer held back at the wall, or a wall gap "
        "thicker than the band) rather than arriving late.",
        "",
        markdown_table(
            _TABLE_COLUMNS,
            _collapse_report_rows(diagnostics, "T"),
        ),
        "",
        "Data: validation/data/ (sources in each file's header).",
    ]
    notes = series.notes
    write_report_md(out_dir, lines, notes, figures)
    write_json(
        out_dir / "report.json",
        {
            "case": "column_collapse",
            "run": str(run.path),
            "passed": passed,
            "exit_status": 0 if passed else 1,
            "criterion": {"martin_moyce_front_raw_mean_abs_error_max": MARTIN_MOYCE_THRESHOLD},
            "reasons": reasons,
            "a_m": series.a,
            "n2": series.n2,
            "seconds_per_T": seconds_per_T,
            "front": fronts,
            "height": heights,
            "diagnostic_front_any_height": diagnostics,
            "front_definition": {"percentile": front_percentile, "band_dp": front_band_dp},
            "offset_note": "shifted = simulation delayed by 'offset' (T units for the front, tau "
            "units for the height), chosen to minimise the mean error; raw = no offset",
            "series": {
                "t": series.t,
                "T": series.T,
                "Z": series.Z,
                "Z_any_height": series.Z_all,
                "tau": series.tau,
                "H": series.H,
            },
            "notes": notes,
            "figures": [f.name for f in figures],
        },
    )
    print(f"column_collapse: {len(series.t)} snapshots, a = {series.a:g} m")
    for label, result in {**fronts, **heights, **diagnostics}.items():
        raw, shifted = result["raw"], result["shifted"]
        print(
            f"  {label:<54} raw mean {fmt(raw['mean_abs_error'], 3):>6} max "
            f"{fmt(raw['max_abs_error'], 3):>6} ({raw['points']}/{raw['table_points']} rows); "
            f"with offset {shifted['offset']:.3g}: mean {fmt(shifted['mean_abs_error'], 3)}"
        )
    print(
        f"verdict: {'PASS' if passed else 'FAIL'}" + (f" ({'; '.join(reasons)})" if reasons else "")
    )
    return 0 if passed else 1


# ------------------------------------------------------------------------------ command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `dambreak validate`."""
    from solver.backend import BACKEND_CHOICES

    parser.add_argument(
        "case", metavar="CASE", choices=CASES, help=f"reference case: {', '.join(CASES)}"
    )
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument(
        "--run",
        help="an existing run folder of the case (default: run "
        "configs/CASE.toml now, into outputs/CASE/)",
    )
    runs.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN",
        help="spheric_test2 convergence study: 2 or more run folders of the case at successive "
        "resolutions, coarse to fine (needs --out)",
    )
    parser.add_argument(
        "--experiment",
        metavar="FILE",
        help="spheric_test2: measured series, CSV with t and any of H1..H4, P1..P8 (SI units)",
    )
    parser.add_argument(
        "--out", help="report folder (default <run>/validation; required with --runs)"
    )
    parser.add_argument(
        "--until",
        type=float,
        metavar="T",
        help="with --runs: compare the runs over their first T seconds only",
    )
    parser.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="auto",
        help="backend when running the case (default auto)",
    )
    parser.add_argument("--threads", type=int, help="CPU threads when running the case")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value when running the case (repeatable)",
    )
    parser.add_argument(
        "--front-percentile",
        type=float,
        default=DEFAULT_FRONT_PERCENTILE,
        help="column_collapse: percentile of x of near-floor fluid taken as the front "
        "(default %(default)g)",
    )
    parser.add_argument(
        "--front-band-dp",
        type=float,
        default=DEFAULT_FRONT_BAND_DP,
        help="column_collapse: height of the near-floor band, in dp (default %(default)g)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite an earlier run in outputs/CASE/ when running the case; with --runs, "
        "write into a non-empty --out",
    )


def _run_case(args: argparse.Namespace) -> Path:
    """Run configs/CASE.toml (with --set overrides); returns the run folder."""
    from solver.config import load_config

    cfg = load_config(CONFIG_DIR / f"{args.case}.toml", args.overrides)
    from solver.run import run_simulation  # imported only when running a case

    out_dir = cfg.output_dir
    run_simulation(cfg, out_dir, backend=args.backend, threads=args.threads, force=args.force)
    return out_dir


def _convergence(args: argparse.Namespace) -> int:
    """`dambreak validate spheric_test2 --runs RUN1 RUN2 ... --out DIR`; 0 done, 2 bad input."""
    from solver.validation.convergence import validate_convergence

    problem = None
    if args.case != "spheric_test2":
        problem = f"--runs is for spheric_test2, not {args.case}"
    elif len(args.runs) < 2:
        problem = "--runs needs at least 2 run folders (coarse to fine)"
    elif not args.out:
        problem = "--runs needs --out DIR, the folder for the report"
    if problem:
        print(f"dambreak validate: {problem}", file=sys.stderr)
        return 2
    if args.overrides or args.threads is not None:
        print("note: --set and --threads apply only when running the case", file=sys.stderr)
    out_dir = Path(args.out)
    experiment = Path(args.experiment) if args.experiment else None
    try:
        validate_convergence(
            [Path(r) for r in args.runs], out_dir, experiment, force=args.force, until=args.until
        )
    except (RunFolderError, ValidationError) as exc:
        print(f"dambreak validate: {exc}", file=sys.stderr)
        return 2
    print(f"report: {out_dir / 'report.md'}")
    return 0


def main(args: argparse.Namespace) -> int:
    """Run `dambreak validate`; 0 pass, 1 fail (column_collapse), 2 cannot validate."""
    from solver.config import ConfigError
    from solver.output.files import OutputExistsError

    if args.experiment and args.case != "spheric_test2":
        print(
            f"dambreak validate: --experiment is for spheric_test2; {args.case} uses the "
            "tables in validation/data/",
            file=sys.stderr,
        )
        return 2
    if args.until is not None and args.runs is None:
        print("dambreak validate: --until is for a convergence study (--runs)", file=sys.stderr)
        return 2
    if args.runs is not None:
        return _convergence(args)
    if args.run and (args.overrides or args.force or args.threads is not None):
        print(
            "note: --set, --threads and --force apply only when running the case; "
            f"reading {args.run}",
            file=sys.stderr,
        )
    try:
        if args.run:
            run_dir = Path(args.run)
        else:
            run_dir = _run_case(args)
        run = RunFolder.open(run_dir)
        if run.config.name != args.case:
            print(
                f"note: the run's case is {run.config.name!r}, validated as {args.case}",
                file=sys.stderr,
            )
        out_dir = Path(args.out) if args.out else run.path / "validation"
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.case == "column_collapse":
            status = validate_column_collapse(
                run,
                out_dir,
                front_percentile=args.front_percentile,
                front_band_dp=args.front_band_dp,
            )
        else:
            from solver.validation.spheric import validate_spheric

            experiment = Path(args.experiment) if args.experiment else None
            status = validate_spheric(run, out_dir, experiment)
    except OutputExistsError as exc:
        print(f"dambreak validate: {exc}; or validate that run with --run", file=sys.stderr)
        return 2
    except (ConfigError, RunFolderError, ValidationError) as exc:
        print(f"dambreak validate: {exc}", file=sys.stderr)
        return 2
    print(f"report: {out_dir / 'report.md'}")
    return status
