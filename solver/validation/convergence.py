"""`dambreak validate spheric_test2 --runs RUN1 RUN2 [RUN3 ...] --out DIR`: a convergence study.

The runs are the same case at successive resolutions, coarse to fine (dp, read from each run's
config.toml, must decrease). The report (report.md, report.json, heights.png, pressures.png in
DIR) gives:

- the runs: dp, particle counts (fluid and total), steps, wall time, particle-steps per second
  and removed particles by reason, from each run's summary.json ("-" for a run without one);
- for every series, the RMS of the difference between the window means of successive runs
  (`spheric_metrics.window_rms_difference`: 50 ms for heights, 20 ms for pressures, over the
  span both cover), and whether it shrinks from pair to pair;
- for every pressure series, the impulse of its first impact in each run
  (`spheric_metrics.first_impact`) and the differences between successive runs: the impulse is
  the quantity of an impact that should converge (Peregrine 2003), where the 20 ms peak follows
  the acoustic ringing;
- for every pressure series, its tension in each run (`spheric_metrics.tension`: the smallest
  20 ms window mean, its time, and how long the window means stay below -100 Pa);
- with --experiment FILE, the yardstick of `spheric_metrics` for every run side by side.

`--until T` compares the runs over [0, T] only, so that a finest run that covers the first
seconds alone is measured against the coarser ones on the same span (every series is cut at T
before anything is computed; T beyond the shortest run changes nothing).

Everything is checked before anything is written: a folder that is not a run or has no SPHERIC
series, runs of different cases, different probe names or dp not decreasing, a malformed
experiment file, and a report folder that already holds files (unless force) are refused with
a ValidationError or RunFolderError naming the folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from solver.scene import lattice_mismatches
from solver.validation.experiments import ValidationError
from solver.validation.plots import fmt, markdown_table, write_json, write_report_md
from solver.validation.run_folder import RunFolder
from solver.validation.spheric import (
    YARDSTICK_TEXT,
    SphericRun,
    experiment_notes,
    read_experiment_csv,
    spheric_figures,
    spheric_series,
    yardstick_tables,
    yardsticks,
)
from solver.validation.spheric_metrics import (
    ARRIVAL_PA,
    IMPULSE_SPAN_S,
    PRESSURE_WINDOW_S,
    TENSION_PA,
    first_impact,
    tension,
    window_rms_difference,
)

__all__ = [
    "impulse_convergence",
    "open_runs",
    "run_rows",
    "successive_differences",
    "tension_by_run",
    "validate_convergence",
]


def cut_at(data: SphericRun, until: float) -> SphericRun:
    """The run's series over [0, until] alone (module doc, --until)."""
    keep = data.t <= until
    return replace(data, t=data.t[keep], series={n: v[keep] for n, v in data.series.items()})


def open_runs(paths: Sequence[Path], until: float | None = None) -> list[SphericRun]:
    """Open the run folders and read their SPHERIC series (cut at `until` [s] if given),
    checking that they are one case with the same series, coarse to fine; ValidationError (or
    RunFolderError) naming the folder."""
    runs = [spheric_series(RunFolder.open(path)) for path in paths]
    if until is not None:
        if until <= 0.0:
            raise ValidationError(f"--until {until:g}: must be a time > 0 s")
        runs = [cut_at(data, until) for data in runs]
        short = [d.run.path for d in runs if d.t.size < 2]
        if short:
            raise ValidationError(
                f"{short[0]}: fewer than 2 probe samples before --until {until:g} s"
            )
    first = runs[0]
    for previous, data in zip(runs, runs[1:], strict=False):
        path, case = data.run.path, data.run.config.name
        if case != first.run.config.name:
            raise ValidationError(
                f"{path}: case {case!r}, but {first.run.path} is case "
                f"{first.run.config.name!r}; a convergence study needs runs of one case"
            )
        if set(data.series) != set(first.series):
            missing = [n for n in first.series if n not in data.series]
            extra = [n for n in data.series if n not in first.series]
            raise ValidationError(
                f"{path}: its probes differ from those of {first.run.path} (missing: "
                f"{', '.join(missing) or 'none'}; extra: {', '.join(extra) or 'none'})"
            )
        if not data.run.config.dp < previous.run.config.dp:
            raise ValidationError(
                f"{path}: dp = {data.run.config.dp:g} m is not smaller than "
                f"dp = {previous.run.config.dp:g} m of {previous.run.path}; give the runs "
                "coarse to fine"
            )
    return runs


def _check_out_dir(out_dir: Path, force: bool) -> None:
    """Refuse a report folder that is a file, or holds files already (unless `force`)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValidationError(f"{out_dir}: exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise ValidationError(
            f"report folder {out_dir} is not empty; pass --force to write into it"
        )


def _labels(runs: Sequence[SphericRun]) -> list[str]:
    """The runs' labels in the tables: #1 (coarsest), #2, ..."""
    return [f"#{k}" for k in range(1, len(runs) + 1)]


_RUN_COLUMNS = {
    "dp": "dp [m]",
    "fluid_particles": "fluid particles",
    "particles": "all particles",
    "steps": "steps",
    "probe_end_time": "probes end [s]",
    "wall_time_s": "wall time [s]",
    "particle_steps_per_second": "particle-steps/s",
}
"""Facts of a run shown in the table of runs (key in report.json: column header)."""


def run_rows(runs: Sequence[SphericRun]) -> tuple[list[str], list[list[Any]], list[dict]]:
    """The table of the runs (headers, rows) and the same facts for report.json."""
    reasons = list(
        dict.fromkeys(r for data in runs for r in data.run.summary.get("removed_by_reason", {}))
    )
    headers = (
        ["run", "folder"]
        + list(_RUN_COLUMNS.values())
        + [f"removed: {reason}" for reason in reasons]
    )
    rows, facts = [], []
    for label, data in zip(_labels(runs), runs, strict=True):
        summary = data.run.summary
        particles = summary.get("particles", {})
        removed = summary.get("removed_by_reason")
        fact = {
            "label": label,
            "run": str(data.run.path),
            "dp": data.run.config.dp,
            "fluid_particles": particles.get("fluid"),
            "particles": particles.get("total"),
            "steps": summary.get("steps"),
            "probe_end_time": float(data.t[-1]),
            "wall_time_s": summary.get("wall_time_s"),
            "particle_steps_per_second": summary.get("particle_steps_per_second"),
            "removed_by_reason": removed,
        }
        facts.append(fact)
        rows.append(
            [label, f"`{data.run.path}`"]
            + [fact[key] for key in _RUN_COLUMNS]
            + [removed.get(reason) if removed is not None else None for reason in reasons]
        )
    return headers, rows, facts


def successive_differences(runs: Sequence[SphericRun]) -> dict[str, dict[str, Any]]:
    """For every series, the window-mean RMS difference of each pair of successive runs
    (`pairs`), the ratio of each to the one before (`ratios`) and whether every one is smaller
    than the one before (`shrinking`; None with fewer than 2 pairs or a pair undefined)."""
    labels = _labels(runs)
    result = {}
    for name in runs[0].series:
        pairs = []
        for k in range(len(runs) - 1):
            coarse, fine = runs[k], runs[k + 1]
            difference = window_rms_difference(
                name, coarse.t, coarse.series[name], fine.t, fine.series[name]
            )
            pairs.append({"coarse": labels[k], "fine": labels[k + 1]} | difference)
        ratios, shrinking = _shrinking([pair["rms"] for pair in pairs])
        result[name] = {"pairs": pairs, "ratios": ratios, "shrinking": shrinking}
    return result


def _shrinking(values: Sequence[float | None]) -> tuple[list[float | None], bool | None]:
    """Ratios of successive values and whether each is smaller than the one before (None with
    fewer than two values or one undefined)."""
    if any(value is None for value in values):
        return [None] * max(len(values) - 1, 0), None
    defined = [float(value) for value in values if value is not None]
    ratios: list[float | None] = [
        b / a if a > 0.0 else None for a, b in zip(defined, defined[1:], strict=False)
    ]
    if len(defined) < 2:
        return ratios, None
    return ratios, all(b < a for a, b in zip(defined, defined[1:], strict=False))


def impulse_convergence(runs: Sequence[SphericRun]) -> dict[str, dict[str, Any]]:
    """For every pressure series, the first impact of each run (`runs`: label, arrival [s],
    impulse [Pa s]), the absolute differences of the impulse between successive runs
    (`differences`), their ratios and whether they shrink (`shrinking`, as in
    `successive_differences`)."""
    labels = _labels(runs)
    result = {}
    for name in runs[0].series:
        if not name.startswith("P"):
            continue
        impacts = [first_impact(data.t, data.series[name]) for data in runs]
        impulses = [impulse for _, impulse in impacts]
        differences = [
            abs(b - a) if a is not None and b is not None else None
            for a, b in zip(impulses, impulses[1:], strict=False)
        ]
        ratios, shrinking = _shrinking(differences)
        result[name] = {
            "runs": [
                {"label": label, "arrival": arrival, "impulse": impulse}
                for label, (arrival, impulse) in zip(labels, impacts, strict=True)
            ],
            "differences": differences,
            "ratios": ratios,
            "shrinking": shrinking,
        }
    return result


def tension_by_run(runs: Sequence[SphericRun]) -> dict[str, list[dict[str, Any]]]:
    """For every pressure series, its `spheric_metrics.tension` in each run, with the run's
    label (`label`)."""
    labels = _labels(runs)
    return {
        name: [
            {"label": label} | tension(data.t, data.series[name])
            for label, data in zip(labels, runs, strict=True)
        ]
        for name in runs[0].series
        if name.startswith("P")
    }


def validate_convergence(
    paths: Sequence[Path],
    out_dir: Path,
    experiment_file: Path | None,
    *,
    force: bool = False,
    until: float | None = None,
) -> None:
    """Write the convergence report of the runs at `paths` (coarse to fine) into `out_dir`
    (module doc), over [0, until] if `until` is given; nothing is written when an input is
    refused."""
    runs = open_runs(paths, until)
    experiment = None
    notes: list[str] = []
    if experiment_file is not None:
        t_exp, measured, ignored = read_experiment_csv(experiment_file)
        experiment = (t_exp, measured)
        notes = experiment_notes(list(runs[0].series), list(measured), ignored)
    _check_out_dir(out_dir, force)
    if runs[0].run.config.name != "spheric_test2":
        notes.append(f"the runs' case is {runs[0].run.config.name!r}, read as spheric_test2")
    notes += [f"{d.run.path}: no summary.json (unfinished run?)" for d in runs if not d.run.summary]
    notes += [note for d in runs for note in lattice_mismatches(d.run.config)]

    out_dir.mkdir(parents=True, exist_ok=True)
    labels = _labels(runs)
    figures = spheric_figures(
        [(f"{label} dp={d.run.config.dp:g}", d) for label, d in zip(labels, runs, strict=True)],
        experiment,
        out_dir,
    )
    headers, rows, facts = run_rows(runs)
    differences = successive_differences(runs)
    pair_names = [f"{labels[k]} vs {labels[k + 1]}" for k in range(len(runs) - 1)]
    difference_rows = [
        [name, "m" if name.startswith("H") else "Pa", entry["pairs"][0]["window_s"] * 1000]
        + [pair["rms"] for pair in entry["pairs"]]
        + (
            [", ".join(fmt(r, 3) for r in entry["ratios"]), entry["shrinking"]]
            if len(runs) > 2
            else []
        )
        for name, entry in differences.items()
    ]
    lines = [
        "# Convergence: SPHERIC benchmark test 2 (dam break on a box)",
        "",
        f"{len(runs)} runs of case {runs[0].run.config.name!r}, coarse to fine"
        + (f", compared over their first {until:g} s (--until)." if until is not None else "."),
        "",
        markdown_table(headers, rows),
        "",
        "## Differences between successive resolutions",
        "",
        "RMS of the difference between the window means of two successive runs (50 ms windows "
        "for heights, 20 ms for pressures, edges at multiples of the width from t = 0) over the "
        "span both cover. Converging runs give differences that shrink from pair to pair.",
        "",
        markdown_table(
            ["series", "unit", "window [ms]"]
            + [f"RMS {p}" for p in pair_names]
            + (["ratios", "shrinks"] if len(runs) > 2 else []),
            difference_rows,
        ),
    ]
    impulses = impulse_convergence(runs)
    if impulses:
        lines += [
            "",
            "## First impact: pressure impulse",
            "",
            f"Impulse of each sensor's first impact: the time integral of pressure over "
            f"{IMPULSE_SPAN_S * 1000:g} ms from its first sample at or above {ARRIVAL_PA:g} Pa "
            "(Peregrine 2003: the peak of an impact is not repeatable, its impulse is; in weakly "
            "compressible SPH the peak also rings at the artificial sound speed). '-': the sensor "
            "is never reached, or the run ends before the span does.",
            "",
            markdown_table(
                ["series"]
                + [f"arrival {label} [s]" for label in labels]
                + [f"impulse {label} [Pa s]" for label in labels]
                + [f"difference {p}, absolute [Pa s]" for p in pair_names]
                + (["ratios", "shrinks"] if len(runs) > 2 else []),
                [
                    [name]
                    + [r["arrival"] for r in entry["runs"]]
                    + [r["impulse"] for r in entry["runs"]]
                    + entry["differences"]
                    + (
                        [", ".join(fmt(r, 3) for r in entry["ratios"]), entry["shrinking"]]
                        if len(runs) > 2
                        else []
                    )
                    for name, entry in impulses.items()
                ],
            ),
        ]
    tensions = tension_by_run(runs)
    if tensions:
        lines += [
            "",
            "## Tension",
            "",
            f"Each pressure series' smallest {PRESSURE_WINDOW_S * 1000:g} ms window mean [Pa], the "
            f"centre of its window [s], and how long its window means stay below "
            f"-{TENSION_PA:g} Pa [s]. Water under the air carries no such tension; a weakly "
            "compressible fluid does wherever its density falls below rho0, so tension that "
            "shrinks as dp does is a discretisation error.",
            "",
            markdown_table(
                ["series"]
                + [f"smallest {label} [Pa]" for label in labels]
                + [f"at {label} [s]" for label in labels]
                + [f"below -{TENSION_PA:g} Pa {label} [s]" for label in labels],
                [
                    [name]
                    + [r["smallest"] for r in entry]
                    + [r["at"] for r in entry]
                    + [r["seconds"] for r in entry]
                    for name, entry in tensions.items()
                ],
            ),
        ]
    by_run: list[tuple[str, dict[str, dict[str, Any]]]] = []
    if experiment is not None:
        by_run = [
            (label, yardsticks(d.t, d.series, *experiment))
            for label, d in zip(labels, runs, strict=True)
        ]
        lines += [
            "",
            "## Yardstick against the measurement",
            "",
            f"Measurement: `{experiment_file}`. {YARDSTICK_TEXT}",
            *yardstick_tables(by_run),
        ]
    write_report_md(out_dir, lines, notes, figures)
    write_json(
        out_dir / "report.json",
        {
            "case": "spheric_test2",
            "mode": "convergence",
            "runs": facts,
            "experiment": str(experiment_file) if experiment_file else None,
            "until_s": until,
            "series": list(runs[0].series),
            "successive_differences": differences,
            "impulses": impulses,
            "tension": tensions,
            "yardstick": dict(by_run),
            "notes": notes,
            "figures": [f.name for f in figures],
        },
    )
    print(
        f"spheric_test2 convergence: {len(runs)} runs, dp "
        + ", ".join(f"{f['dp']:g}" for f in facts)
    )
    for name, entry in differences.items():
        values = "  ".join(fmt(pair["rms"], 3) for pair in entry["pairs"])
        print(f"  {name:<7} RMS of successive differences: {values}")
    for name, entry in impulses.items():
        values = "  ".join(fmt(r["impulse"], 4) for r in entry["runs"])
        print(f"  {name:<7} first-impact impulse [Pa s]: {values}")
    for note in notes:
        print(f"  note: {note}")
