"""SPHERIC benchmark test 2 (Kleefsman et al. 2005; cases.md, section 2): a run's water heights
and pressures, the measured series, and `dambreak validate spheric_test2` for one run.

Series of a run (`spheric_series`), from its probes.csv: H1..H4, the height gauges, as water
heights above the tank floor [m] (the gauge gives the surface's z; the floor, tank min z, is
subtracted); P1..P8, pressures [Pa]; and any column H<k>_<suffix> (e.g. H1_swl, H1_top) or
P<k>_<suffix> (e.g. P1_face): another definition of gauge H<k>'s height or another reading of
sensor P<k>, handled like H<k> or P<k> and compared with the measured H<k> or P<k>.

The report always gives the run's own figures (`own_figures`: `spheric_metrics.height_figures`
and `pressure_figures`, among them each sensor's tension).

With --experiment FILE (`read_experiment_csv`: a column t and any of H1..H4, P1..P8 in SI
units) the measurement is overlaid on the plots, and for every series in both the report gives
the yardstick of `spheric_metrics` (window means) and the raw comparison of `compare_series`
(the simulation interpolated onto the measured times: RMS error, and the peak sample and its
time of each).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solver.output.files import atomic_write_text
from solver.scene import lattice_mismatches
from solver.validation.experiments import ValidationError
from solver.validation.plots import fmt, markdown_table, write_json, write_report_md
from solver.validation.run_folder import RunFolder
from solver.validation.spheric_metrics import (
    ARRIVAL_PA,
    EARLY_END_S,
    HEIGHT_WINDOW_S,
    IMPULSE_SPAN_S,
    LEVEL_SPAN_S,
    PRESSURE_WINDOW_S,
    TENSION_PA,
    height_figures,
    pressure_figures,
    yardstick,
)

__all__ = [
    "own_figures",
    "HEIGHT_PANELS",
    "PRESSURE_PANELS",
    "SPHERIC_SERIES",
    "YARDSTICK_TEXT",
    "ExperimentFileError",
    "SphericRun",
    "compare_series",
    "experiment_notes",
    "read_experiment_csv",
    "reference_name",
    "spheric_figures",
    "spheric_series",
    "validate_spheric",
    "yardstick_tables",
    "yardsticks",
]

HEIGHT_PANELS: tuple[str, ...] = tuple(f"H{i}" for i in range(1, 5))
PRESSURE_PANELS: tuple[str, ...] = tuple(f"P{i}" for i in range(1, 9))
#: The measured series of the benchmark: water heights H1..H4 [m], pressures P1..P8 [Pa].
SPHERIC_SERIES: tuple[str, ...] = HEIGHT_PANELS + PRESSURE_PANELS

_VARIANT = re.compile(r"(H[1-4]|P[1-8])_\w+")


class ExperimentFileError(ValidationError):
    """An experiment file is malformed; the message names the file and the problem."""


def reference_name(name: str) -> str | None:
    """The measured series a probe column is compared with: itself for H1..H4 and P1..P8, H<k>
    or P<k> for a variant H<k>_<suffix> or P<k>_<suffix>; None for any other column."""
    if name in SPHERIC_SERIES:
        return name
    match = _VARIANT.fullmatch(name)
    return match.group(1) if match else None


@dataclass(frozen=True)
class SphericRun:
    """The SPHERIC series of a run folder: probe times [s] and series by name, in the order
    H1 (then its variants), ..., H4, P1, ..., P8."""

    run: RunFolder
    t: np.ndarray
    series: dict[str, np.ndarray]


def spheric_series(run: RunFolder) -> SphericRun:
    """Read the SPHERIC series of `run` (module doc); ValidationError naming the folder if it
    has none or too few samples."""
    if not run.has_probes:
        raise ValidationError(f"{run.path}: the run has no probes.csv (H1..H4, P1..P8)")
    t, probes = run.probes()
    if t.size < 2:
        raise ValidationError(f"{run.path}/probes.csv: fewer than 2 samples")
    floor = run.config.tank.box.min[2]
    names = [name for name in probes if reference_name(name) is not None]
    if not names:
        raise ValidationError(f"{run.path}/probes.csv: none of {', '.join(SPHERIC_SERIES)}")
    names.sort(key=lambda n: (SPHERIC_SERIES.index(str(reference_name(n))), n != reference_name(n)))
    series = {n: probes[n] - floor if n.startswith("H") else probes[n] for n in names}
    return SphericRun(run, t, series)


def _number(text: str) -> float:
    """A CSV cell as a float; an empty cell or 'nan' is NaN (a missing measurement)."""
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    return float(text)


def read_experiment_csv(path: str | Path) -> tuple[np.ndarray, dict[str, np.ndarray], list[str]]:
    """Read a measured time series file: a column t [s] and any of H1..H4 [m], P1..P8 [Pa].

    Lines starting with '#' are comments; the first other line is the header. Cells are
    separated by commas (or semicolons, tabs, spaces, if the header uses those). Column names
    match case-insensitively; "time" is accepted for t. An empty cell (or nan) is a missing
    value. Returns t, the known series by name, and the names of ignored columns. Raises
    ExperimentFileError naming the file and the problem.
    """
    file = Path(path)

    def fail(problem: str) -> ExperimentFileError:
        return ExperimentFileError(f"experiment file {file}: {problem}")

    if not file.is_file():
        raise fail("no such file")
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read it: {exc}") from None
    numbered = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not numbered:
        raise fail("it is empty (no header line)")
    header_line = numbered[0][1]
    delimiter = next((d for d in (",", ";", "\t") if d in header_line), None)

    def split(line: str) -> list[str]:
        if delimiter is None:
            return line.split()
        return next(csv.reader(io.StringIO(line), delimiter=delimiter))

    header = [name.strip() for name in split(header_line)]
    canonical = {name.lower(): name for name in SPHERIC_SERIES}
    canonical.update({"t": "t", "time": "t"})
    columns: dict[str, int] = {}
    ignored: list[str] = []
    for k, name in enumerate(header):
        key = canonical.get(name.lower())
        if key is None:
            ignored.append(name)
            continue
        if key in columns:
            raise fail(f"column {key} appears twice in the header")
        columns[key] = k
    if "t" not in columns:
        raise fail(f"no column 't' (time in seconds) in the header {header}")
    if len(columns) == 1:
        raise fail(f"no column among {', '.join(SPHERIC_SERIES)} in the header {header}")
    rows = []
    for number, line in numbered[1:]:
        cells = split(line)
        if len(cells) != len(header):
            raise fail(f"line {number}: {len(cells)} fields, the header has {len(header)}")
        row = []
        for name, k in columns.items():
            try:
                row.append(_number(cells[k]))
            except ValueError:
                raise fail(f"line {number}, column {name}: {cells[k]!r} is not a number") from None
        rows.append((number, row))
    if len(rows) < 2:
        raise fail(f"{len(rows)} data row(s); at least 2 are needed")
    table = np.array([row for _, row in rows], dtype=np.float64)
    names = list(columns)
    t = table[:, names.index("t")]
    for (number, _), value in zip(rows, t, strict=True):
        if not math.isfinite(value):
            raise fail(f"line {number}: t is missing or not finite")
    steps = np.diff(t)
    if np.any(steps <= 0.0):
        bad = int(np.flatnonzero(steps <= 0.0)[0]) + 1
        raise fail(
            f"line {rows[bad][0]}: t = {t[bad]:g} does not increase (previous "
            f"{t[bad - 1]:g}); times must be strictly increasing"
        )
    series = {name: table[:, k] for k, name in enumerate(names) if name != "t"}
    for name in list(series):
        if not np.any(np.isfinite(series[name])):
            ignored.append(f"{name} (no values)")
            del series[name]
    if not series:
        raise fail("every measured column is empty")
    return t, series, ignored


def compare_series(
    t_sim: np.ndarray, y_sim: np.ndarray, t_exp: np.ndarray, y_exp: np.ndarray
) -> dict[str, Any]:
    """RMS error and peaks of a simulated series against a measured one.

    Over the times both cover: the simulation is interpolated onto the measurement's times
    (missing measured values skipped); RMS of the difference, the same over the measured
    range, and each series' peak (largest value) and the time of that peak.
    """
    t_sim, y_sim = np.asarray(t_sim, np.float64), np.asarray(y_sim, np.float64)
    good = np.isfinite(y_exp)
    t_exp, y_exp = np.asarray(t_exp, np.float64)[good], np.asarray(y_exp, np.float64)[good]
    start, end = max(t_sim[0], t_exp[0]), min(t_sim[-1], t_exp[-1])
    window_exp = (t_exp >= start) & (t_exp <= end)
    window_sim = (t_sim >= start) & (t_sim <= end)
    result: dict[str, Any] = {
        "window_s": [float(start), float(end)] if end >= start else None,
        "points": int(np.count_nonzero(window_exp)),
        "rms_error": None,
        "normalised_rms_error": None,
        "peak_sim": None,
        "peak_sim_time": None,
        "peak_exp": None,
        "peak_exp_time": None,
    }
    if end < start or not np.any(window_exp) or not np.any(window_sim):
        return result
    te, ye = t_exp[window_exp], y_exp[window_exp]
    diff = np.interp(te, t_sim, y_sim) - ye
    rms = float(np.sqrt(np.mean(diff * diff)))
    span = float(np.ptp(ye))
    ts, ys = t_sim[window_sim], y_sim[window_sim]
    i, j = int(np.argmax(ys)), int(np.argmax(ye))
    result.update(
        rms_error=rms,
        normalised_rms_error=rms / span if span > 0.0 else None,
        peak_sim=float(ys[i]),
        peak_sim_time=float(ts[i]),
        peak_exp=float(ye[j]),
        peak_exp_time=float(te[j]),
    )
    return result


def yardsticks(
    t: np.ndarray, sim: dict[str, np.ndarray], t_exp: np.ndarray, measured: dict[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    """The yardstick (`spheric_metrics.yardstick`) of every simulated series whose measured
    counterpart is given, with that counterpart's name as "reference"."""
    results = {}
    for name, values in sim.items():
        ref = reference_name(name)
        if ref in measured:
            results[name] = {"reference": ref} | yardstick(name, t, values, t_exp, measured[ref])
    return results


def experiment_notes(sim: Sequence[str], measured: Sequence[str], ignored: list[str]) -> list[str]:
    """Notes on what of the run and of the measurement is left uncompared."""
    references = {reference_name(name) for name in sim}
    only_exp = [name for name in measured if name not in references]
    only_sim = [name for name in sim if reference_name(name) not in measured]
    notes = []
    if only_exp:
        notes.append(f"measured but not in the run: {', '.join(only_exp)}")
    if only_sim:
        notes.append(f"in the run but not measured: {', '.join(only_sim)}")
    if ignored:
        notes.append(f"columns ignored in the experiment file: {', '.join(ignored)}")
    if len(only_sim) == len(sim):
        notes.append("no series is both measured and simulated; nothing compared")
    return notes


_HEIGHT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("windows", "windows"),
    ("RMS [m]", "rms"),
    ("bias sim - exp [m]", "bias"),
    (f"windows t < {EARLY_END_S:g} s", "first_2s.windows"),
    (f"RMS t < {EARLY_END_S:g} s [m]", "first_2s.rms"),
    (f"bias t < {EARLY_END_S:g} s [m]", "first_2s.bias"),
)
_LEVEL = f"mean {LEVEL_SPAN_S[0]:g}-{LEVEL_SPAN_S[1]:g} s"
_PRESSURE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("windows", "windows"),
    ("RMS [Pa]", "rms"),
    ("peak sim [Pa]", "peak_sim"),
    ("at [s]", "peak_sim_time"),
    ("peak exp [Pa]", "peak_exp"),
    ("at [s]", "peak_exp_time"),
    ("peak sim/exp", "peak_ratio"),
    ("t peak sim - exp [s]", "peak_time_difference"),
    (f"{_LEVEL} sim [Pa]", "level_sim"),
    (f"{_LEVEL} exp [Pa]", "level_exp"),
    (f"{_LEVEL} sim/exp", "level_ratio"),
    ("min sim [Pa]", "min_sim"),
    ("min exp [Pa]", "min_exp"),
    ("arrival sim - exp [s]", "arrival_difference"),
    ("impulse sim [Pa s]", "impulse_sim"),
    ("impulse exp [Pa s]", "impulse_exp"),
    ("impulse sim/exp", "impulse_ratio"),
)
"""(column header, key in the metrics; "a.b" is key b of entry a) of the yardstick tables."""


def _metric(metrics: dict[str, Any], key: str) -> Any:
    """metrics[key], where "a.b" means metrics["a"]["b"]."""
    for part in key.split("."):
        metrics = metrics[part]
    return metrics


def yardstick_tables(results: Sequence[tuple[str, dict[str, dict[str, Any]]]]) -> list[str]:
    """Markdown of the yardstick of one or more runs: (run label, `yardsticks` result) each.

    One table for heights and one for pressures, a row per series and run (the runs of a
    series next to each other; a "run" column only when there are several).
    """
    several = len(results) > 1
    names = list(dict.fromkeys(name for _, by_name in results for name in by_name))
    lines = []
    for title, prefix, width, columns in (
        ("Water heights", "H", HEIGHT_WINDOW_S, _HEIGHT_COLUMNS),
        ("Pressures", "P", PRESSURE_WINDOW_S, _PRESSURE_COLUMNS),
    ):
        rows = [
            [f"{name} (vs {by_name[name]['reference']})" if name not in SPHERIC_SERIES else name]
            + ([label] if several else [])
            + [_metric(by_name[name], key) for _, key in columns]
            for name in names
            if name.startswith(prefix)
            for label, by_name in results
            if name in by_name
        ]
        if rows:
            headers = ["series"] + (["run"] if several else []) + [h for h, _ in columns]
            lines += [
                "",
                f"### {title}: {width * 1000:g} ms window means",
                "",
                markdown_table(headers, rows),
            ]
    return lines


YARDSTICK_TEXT = (
    "Both series are cut to the time span they share and averaged over consecutive windows "
    f"(edges at multiples of the width from t = 0; {HEIGHT_WINDOW_S * 1000:g} ms for heights, "
    f"{PRESSURE_WINDOW_S * 1000:g} ms for pressures); a window counts when both have samples "
    "in it. RMS and bias (sim - exp) are taken over the differences of window means, also "
    f"over the windows within the first {EARLY_END_S:g} s for heights. For pressures: the peak "
    "of each series' window means and its time (the window's centre), their ratio sim/exp and "
    f"time difference, the mean of the window means within {LEVEL_SPAN_S[0]:g} to "
    f"{LEVEL_SPAN_S[1]:g} s and their ratio, and the smallest window mean (a negative one is "
    "the tension artefact of weakly compressible SPH at impacts); the impulse of the first "
    f"impact, the time integral of pressure over {IMPULSE_SPAN_S * 1000:g} ms from the first "
    f"sample at or above {ARRIVAL_PA:g} Pa, of each and their ratio (the peak of an impact is "
    "not repeatable, its impulse is: Peregrine 2003). A variant H<k>_<suffix> or "
    "P<k>_<suffix> is compared with the measured H<k> or P<k>."
)
"""How the yardstick is taken, for the reports."""


def _panel_figure(
    panels: Sequence[str],
    unit: str,
    runs: Sequence[tuple[str, SphericRun]],
    experiment: tuple[np.ndarray, dict[str, np.ndarray]] | None,
    path: Path,
) -> Path:
    """A grid of one panel per measured series name: every series of every run that is compared
    with it (one colour per run, one line style per variant), the measurement in black."""
    from solver.validation.plots import pyplot, save_figure

    plt = pyplot()
    cols = 2
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(9, 2.3 * rows + 0.6), squeeze=False, sharex=True)
    styles = ("-", "--", ":", "-.")
    for ax, panel in zip(axes.flat, panels, strict=False):
        for number, (label, run) in enumerate(runs):
            names = [n for n in run.series if reference_name(n) == panel]
            for k, name in enumerate(names):
                text = " ".join(part for part in (label, name if len(names) > 1 else "") if part)
                ax.plot(
                    run.t,
                    run.series[name],
                    styles[k % len(styles)],
                    lw=1,
                    color=f"C{number}",
                    label=text or name,
                )
        if experiment is not None and panel in experiment[1]:
            ax.plot(
                experiment[0], experiment[1][panel], lw=1, color="k", alpha=0.7, label="experiment"
            )
        ax.set_title(panel, fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.supxlabel("t [s]")
    return save_figure(fig, path)


def spheric_figures(
    runs: Sequence[tuple[str, SphericRun]],
    experiment: tuple[np.ndarray, dict[str, np.ndarray]] | None,
    out_dir: Path,
) -> list[Path]:
    """heights.png (a panel for each of H1..H4 the runs have) and pressures.png (P1..P8), every
    series of every run overlaid, with the measurement when given."""
    figures = []
    for panels, unit, file in (
        (HEIGHT_PANELS, "water height [m]", "heights.png"),
        (PRESSURE_PANELS, "pressure [Pa]", "pressures.png"),
    ):
        shown = [
            p for p in panels if any(reference_name(n) == p for _, r in runs for n in r.series)
        ]
        if shown:
            figures.append(_panel_figure(shown, unit, runs, experiment, out_dir / file))
    return figures


def own_figures(run: SphericRun) -> dict[str, dict[str, Any]]:
    """Every series' own figures (`height_figures` for H..., `pressure_figures` for P...)."""
    return {
        name: (height_figures if name.startswith("H") else pressure_figures)(run.t, values)
        for name, values in run.series.items()
    }


def own_figure_tables(figures: dict[str, dict[str, Any]]) -> list[str]:
    """The report's section on the run's own figures (markdown lines)."""
    heights = {n: f for n, f in figures.items() if n.startswith("H")}
    pressures = {n: f for n, f in figures.items() if n.startswith("P")}
    lines = [
        "## The run's own figures",
        "",
        f"Heights [m]: the mean of the {HEIGHT_WINDOW_S * 1000:g} ms window means over the "
        f"first {EARLY_END_S:g} s and after. Pressures [Pa]: the peak of the "
        f"{PRESSURE_WINDOW_S * 1000:g} ms window means and the centre of its window [s], the "
        f"level (mean of the window means within {LEVEL_SPAN_S[0]:g} to {LEVEL_SPAN_S[1]:g} s), "
        f"the first impact (arrival at {ARRIVAL_PA:g} Pa [s], impulse over "
        f"{IMPULSE_SPAN_S * 1000:g} ms [Pa s]) and the tension (smallest window mean, and the "
        f"time the window means stay below -{TENSION_PA:g} Pa [s]).",
        "",
    ]
    if heights:
        lines += [
            markdown_table(
                ["series", f"mean, first {EARLY_END_S:g} s", f"mean, after {EARLY_END_S:g} s"],
                [[n, f["mean_first_2s"], f["mean_after_2s"]] for n, f in heights.items()],
            ),
            "",
        ]
    if pressures:
        lines.append(
            markdown_table(
                [
                    "series",
                    "peak",
                    "at",
                    "level",
                    "level windows",
                    "arrival",
                    "impulse",
                    "smallest",
                    "at",
                    "in tension",
                ],
                [
                    [
                        n,
                        f["peak"],
                        f["peak_time"],
                        f["level"],
                        f["level_windows"],
                        f["arrival"],
                        f["impulse"],
                        f["tension"]["smallest"],
                        f["tension"]["at"],
                        f["tension"]["seconds"],
                    ]
                    for n, f in pressures.items()
                ],
            )
        )
    return lines


def validate_spheric(run: RunFolder, out_dir: Path, experiment_file: Path | None) -> int:
    """Time series of SPHERIC test 2's gauges and sensors, against a measurement if given."""
    data = spheric_series(run)
    t, sim = data.t, data.series
    experiment = None
    ignored: list[str] = []
    if experiment_file is not None:
        t_exp, measured, ignored = read_experiment_csv(experiment_file)
        experiment = (t_exp, measured)

    figures = spheric_figures([("simulation", data)], experiment, out_dir)
    csv_lines = [",".join(["t", *sim])] + [
        ",".join([repr(float(t[k]))] + [repr(float(sim[n][k])) for n in sim]) for k in range(t.size)
    ]
    atomic_write_text(out_dir / "spheric_series.csv", "\n".join(csv_lines) + "\n")

    raw: dict[str, dict[str, Any]] = {}
    windowed: dict[str, dict[str, Any]] = {}
    notes = []
    if experiment is not None:
        t_exp, measured = experiment
        for name, values in sim.items():
            ref = reference_name(name)
            if ref in measured:
                raw[name] = compare_series(t, values, t_exp, measured[ref])
        windowed = yardsticks(t, sim, t_exp, measured)
        notes = experiment_notes(list(sim), list(measured), ignored)
    # The water as built, where the lattice cannot fill the config's blocks (e.g. the reservoir
    # 0.56 m deep at dp 0.02): it moves the gauges from t = 0.
    notes += lattice_mismatches(run.config)

    lines = [
        "# Validation: SPHERIC benchmark test 2 (dam break on a box)",
        "",
        f"Run `{run.path}` (case {run.config.name!r}, dp = {run.config.dp:g} m), probes sampled "
        f"{t.size} times from {t[0]:g} s to {t[-1]:g} s. Heights are water heights above the "
        "tank floor [m], pressures in Pa. The series are in spheric_series.csv.",
        "",
    ]
    figures_own = own_figures(data)
    lines += [*own_figure_tables(figures_own), ""]
    if experiment is None:
        lines.append("No measurement given (--experiment FILE): the series are plotted alone.")
    else:
        lines += [
            f"Measurement: `{experiment_file}`.",
            "",
            "## Yardstick: window means",
            "",
            YARDSTICK_TEXT,
            *yardstick_tables([("simulation", windowed)]),
            "",
            "## Raw series",
            "",
            "RMS error of the simulation (interpolated onto the measured times) over the time "
            "both cover; normalised RMS = RMS / measured range; peaks are the largest samples "
            "in that span.",
            "",
            markdown_table(
                [
                    "series",
                    "points",
                    "RMS error",
                    "normalised RMS",
                    "peak sim",
                    "at t [s]",
                    "peak exp",
                    "at t [s]",
                ],
                [
                    [
                        name,
                        r["points"],
                        r["rms_error"],
                        r["normalised_rms_error"],
                        r["peak_sim"],
                        r["peak_sim_time"],
                        r["peak_exp"],
                        r["peak_exp_time"],
                    ]
                    for name, r in raw.items()
                ],
            ),
        ]
    write_report_md(out_dir, lines, notes, figures)
    write_json(
        out_dir / "report.json",
        {
            "case": "spheric_test2",
            "run": str(run.path),
            "experiment": str(experiment_file) if experiment_file else None,
            "series": list(sim),
            "own_figures": figures_own,
            "comparison": raw,
            "yardstick": windowed,
            "notes": notes,
            "figures": [f.name for f in figures],
        },
    )
    print(f"spheric_test2: {len(sim)} series ({', '.join(sim)}), {t.size} samples")
    for name, r in windowed.items():
        if name.startswith("H"):
            print(f"  {name:<7} RMS {fmt(r['rms'], 3):>8} m  bias {fmt(r['bias'], 3):>9} m")
        else:
            print(
                f"  {name:<7} RMS {fmt(r['rms'], 3):>8} Pa  peak sim/exp {fmt(r['peak_ratio'], 3)}"
                f" (dt {fmt(r['peak_time_difference'], 3)} s), {_LEVEL} sim/exp "
                f"{fmt(r['level_ratio'], 3)}, min sim {fmt(r['min_sim'], 3)} Pa, "
                f"impulse sim/exp {fmt(r['impulse_ratio'], 3)}"
            )
    for note in notes:
        print(f"  note: {note}")
    return 0
