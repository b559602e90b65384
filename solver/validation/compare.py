"""`dambreak compare RUN_A RUN_B`: do two runs of one case give the same physics?

Two runs of the same config (on two backends, in two precisions, with two thread counts, with
the neighbour sums taken in two orders) are compared at every snapshot time they share:

- particle level: particles are matched by id; RMS and maximum position difference of the
  fluid particles present in both, in units of dp, RMS and maximum velocity difference [m/s],
  and the number of particles present in only one run. Trajectories of a chaotic free-surface
  flow diverge whatever the precision, so this is reported, with its growth over time (the
  times at which the RMS difference reaches 0.1 dp and 1 dp, and the exponential rate between
  them), but it never decides the verdict.
- macroscopic: kinetic and potential energy of the fluid, its centre of mass, the front, the
  fluid mass, the removed-particle count (see `solver.validation.metrics`), and every probe
  series in both runs.

Verdict (the exit status): 0 when every macroscopic quantity agrees within its tolerance at
every common time, 1 otherwise, 2 when the runs cannot be compared (unreadable folder, configs
that differ in anything but physics.precision, the keys that only order the neighbour sums
(neighbors.cells_per_support, neighbors.pair_halves and neighbors.lists) and the [output]
section, different particle id sets at the first snapshot, no common snapshot time).
Tolerances (command-line options):

- energy: |E_A - E_B| <= tol_energy * E_p,A(t0) for kinetic and potential energy (default 2 %)
- centre of mass: |com_A - com_B| <= tol_com_dp dp (default 2 dp)
- front: |front_A - front_B| <= tol_front_dp dp (default 2 dp)
- mass: |M_A - M_B| <= tol_mass M_A(t0) (default 2 %, the bound issue 4 sets for every
  macroscopic quantity: which particles leak through a thin wall differs from run to run, so
  two sound runs can lose a few different particles)
- probes: RMS(B - A) <= tol_probe * (max A - min A), B interpolated onto A's sample times over
  the time both cover (default 5 %)

The removed-particle count is reported; it enters the verdict through the fluid mass.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solver.snapshot import Snapshot
from solver.validation.metrics import (
    DEFAULT_FRONT_BAND_DP,
    DEFAULT_FRONT_PERCENTILE,
    FluidMetrics,
    compute_metrics,
    fluid_mask,
)
from solver.validation.plots import fmt, markdown_table, write_json
from solver.validation.run_folder import RunFolder, RunFolderError

__all__ = [
    "IGNORED_CONFIG_KEYS",
    "TIME_MATCH_RTOL",
    "Comparison",
    "IncompatibleRunsError",
    "ParticleDifference",
    "Tolerances",
    "add_arguments",
    "common_times",
    "compare_runs",
    "config_differences",
    "divergence_growth",
    "main",
    "particle_difference",
    "write_report",
]

#: Config keys allowed to differ between compared runs (a dotted key, or a whole section): the
#: precision, the keys that change only the order of the neighbour sums, and the output.
IGNORED_CONFIG_KEYS: tuple[str, ...] = (
    "physics.precision",
    "neighbors.cells_per_support",
    "neighbors.x_refinement",
    "neighbors.pair_halves",
    "neighbors.lists",
    "output",
)

#: Two snapshot times are the same when they differ by at most this, relative.
TIME_MATCH_RTOL = 1e-9

#: Particle divergence levels (in dp) whose crossing times are reported.
DIVERGENCE_LEVELS_DP: tuple[float, float] = (0.1, 1.0)


class IncompatibleRunsError(Exception):
    """The two runs cannot be compared; the message says why."""


@dataclass(frozen=True)
class Tolerances:
    """Agreement thresholds of the verdict (see the module docstring)."""

    energy: float = 0.02
    com_dp: float = 2.0
    front_dp: float = 2.0
    mass: float = 0.02
    probe: float = 0.05


@dataclass(frozen=True)
class ParticleDifference:
    """Particle-level difference of two snapshots at one time."""

    time: float
    matched: int
    only_a: int
    only_b: int
    position_rms_dp: float
    position_max_dp: float
    velocity_rms: float
    velocity_max: float


@dataclass
class Comparison:
    """Everything `compare_runs` found; `agree` is the verdict."""

    run_a: str
    run_b: str
    tolerances: Tolerances
    dp: float
    times: list[float] = field(default_factory=list)
    metrics_a: list[FluidMetrics] = field(default_factory=list)
    metrics_b: list[FluidMetrics] = field(default_factory=list)
    removed_a: list[int] = field(default_factory=list)
    removed_b: list[int] = field(default_factory=list)
    particles: list[ParticleDifference] = field(default_factory=list)
    checks: dict[str, list[float]] = field(default_factory=dict)
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    probe_series: dict[str, Any] = field(default_factory=dict)
    growth: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    energy_reference: float = 0.0
    summary_a: dict[str, Any] = field(default_factory=dict)
    summary_b: dict[str, Any] = field(default_factory=dict)

    @property
    def agree(self) -> bool:
        """The verdict: every macroscopic quantity within tolerance at every common time."""
        return not self.failures

    @property
    def exit_status(self) -> int:
        """0 when the runs agree, 1 when they do not."""
        return 0 if self.agree else 1

    def worst(self, check: str) -> float:
        """The largest value of one check over all common times (NaN-free; 0 when none)."""
        values = [v for v in self.checks.get(check, []) if not math.isnan(v)]
        return max(values) if values else 0.0


#: The macroscopic checks made at every common time: name, meaning, tolerance attribute.
CHECKS: tuple[tuple[str, str, str], ...] = (
    ("kinetic_energy", "|dE_k| / E_p(t0)", "energy"),
    ("potential_energy", "|dE_p| / E_p(t0)", "energy"),
    ("centre_of_mass", "|d com| / dp", "com_dp"),
    ("front", "|d front| / dp", "front_dp"),
    ("mass", "|dM| / M(t0)", "mass"),
)


# ------------------------------------------------------------------------------ comparability


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A TOML dictionary as {dotted key: value}; arrays of tables get [i] in their keys."""
    flat: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, item in enumerate(value):
            flat.update(_flatten(item, f"{prefix}[{i}]"))
    else:
        flat[prefix] = value
    return flat


def _ignored(key: str, ignored: tuple[str, ...]) -> bool:
    """Whether dotted `key` is, or lies under, one of the `ignored` keys."""
    return any(key == i or key.startswith(i + ".") or key.startswith(i + "[") for i in ignored)


def config_differences(
    a: dict[str, Any], b: dict[str, Any], ignored: tuple[str, ...] = IGNORED_CONFIG_KEYS
) -> list[str]:
    """The keys in which two config TOML dictionaries differ, as "key: A vs B" lines."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    lines = []
    for key in sorted(set(flat_a) | set(flat_b)):
        if _ignored(key, ignored):
            continue
        va, vb = flat_a.get(key, "(unset)"), flat_b.get(key, "(unset)")
        if va != vb:
            lines.append(f"{key}: {va!r} vs {vb!r}")
    return lines


def _same_time(ta: float, tb: float) -> bool:
    """Whether two snapshot times are the same instant (relative tolerance TIME_MATCH_RTOL)."""
    return abs(ta - tb) <= TIME_MATCH_RTOL * max(abs(ta), abs(tb)) + 1e-300


def common_times(times_a: np.ndarray, times_b: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs (i in A, j in B) of snapshots taken at the same time, in time order."""
    times_b = np.asarray(times_b, dtype=np.float64)
    pairs = []
    if times_b.size == 0:
        return pairs
    for i, ta in enumerate(np.asarray(times_a, dtype=np.float64)):
        j = int(np.searchsorted(times_b, ta))
        for k in (j - 1, j):
            if 0 <= k < times_b.size and _same_time(float(ta), float(times_b[k])):
                pairs.append((i, k))
                break
    return pairs


def _check_ids(first_a: Snapshot, first_b: Snapshot) -> None:
    """Raise IncompatibleRunsError unless both first snapshots hold the same particle ids."""
    ids_a = np.unique(np.asarray(first_a.id))
    ids_b = np.unique(np.asarray(first_b.id))
    if ids_a.size != first_a.count or ids_b.size != first_b.count:
        raise IncompatibleRunsError("a first snapshot holds a particle id twice")
    if ids_a.size != ids_b.size or not np.array_equal(ids_a, ids_b):
        only_a = np.setdiff1d(ids_a, ids_b).size
        only_b = np.setdiff1d(ids_b, ids_a).size
        raise IncompatibleRunsError(
            f"the particle sets differ at t = {first_a.time:g}: A has {ids_a.size} particles, "
            f"B {ids_b.size}; {only_a} ids only in A, {only_b} only in B"
        )


# ------------------------------------------------------------------------------ measurements


def particle_difference(a: Snapshot, b: Snapshot, dp: float) -> ParticleDifference:
    """Position and velocity differences of the particles present in both snapshots.

    RMS and maximum are taken over the FLUID particles (kind in A) found in both; wall and
    obstacle particles do not move and would only dilute the RMS. `only_a`/`only_b` count
    particles of any kind present in one snapshot only (removed in the other run).
    """
    ids_a, ids_b = np.asarray(a.id), np.asarray(b.id)
    _, ia, ib = np.intersect1d(ids_a, ids_b, assume_unique=True, return_indices=True)
    only_a, only_b = int(ids_a.size - ia.size), int(ids_b.size - ib.size)
    fluid = fluid_mask(a)[ia]
    ia, ib = ia[fluid], ib[fluid]
    if ia.size == 0:
        nan = math.nan
        return ParticleDifference(float(a.time), 0, only_a, only_b, nan, nan, nan, nan)
    dx = np.asarray(a.position, np.float64)[ia] - np.asarray(b.position, np.float64)[ib]
    dv = np.asarray(a.velocity, np.float64)[ia] - np.asarray(b.velocity, np.float64)[ib]
    r = np.sqrt(np.sum(dx * dx, axis=1)) / dp
    s = np.sqrt(np.sum(dv * dv, axis=1))
    return ParticleDifference(
        time=float(a.time),
        matched=int(ia.size),
        only_a=only_a,
        only_b=only_b,
        position_rms_dp=float(np.sqrt(np.mean(r * r))),
        position_max_dp=float(np.max(r)),
        velocity_rms=float(np.sqrt(np.mean(s * s))),
        velocity_max=float(np.max(s)),
    )


def _crossing_time(times: np.ndarray, values: np.ndarray, level: float) -> float | None:
    """First time `values` reaches `level`, interpolated (in log where possible); None if never."""
    above = np.flatnonzero(values >= level)
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(times[0])
    t0, t1, v0, v1 = times[i - 1], times[i], values[i - 1], values[i]
    if v0 > 0.0:
        frac = (math.log(level) - math.log(v0)) / (math.log(v1) - math.log(v0))
    else:
        frac = (level - v0) / (v1 - v0)
    return float(t0 + frac * (t1 - t0))


def divergence_growth(
    times: np.ndarray,
    rms_dp: np.ndarray,
    levels: tuple[float, float] = DIVERGENCE_LEVELS_DP,
) -> dict[str, Any]:
    """How fast the particle RMS position difference (in dp) grows.

    Reports the first times it reaches each of `levels` and an exponential growth rate
    lambda (RMS ~ exp(lambda t)): from the two crossing times when both exist,
    ln(high / low) / (t_high - t_low); otherwise a least-squares fit of ln RMS against t over
    the samples where RMS > 0 (at least two). Doubling time ln 2 / lambda for lambda > 0.
    """
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(rms_dp, dtype=np.float64)
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    low, high = levels
    result: dict[str, Any] = {
        "levels_dp": list(levels),
        "time_to_level": {
            f"{low:g}": _crossing_time(t, v, low),
            f"{high:g}": _crossing_time(t, v, high),
        },
        "rate_per_s": None,
        "doubling_time_s": None,
        "method": None,
        "identical": bool(v.size > 0 and np.all(v == 0.0)),
        "final_rms_dp": float(v[-1]) if v.size else None,
    }
    t_low, t_high = result["time_to_level"][f"{low:g}"], result["time_to_level"][f"{high:g}"]
    rate = None
    if t_low is not None and t_high is not None and t_high > t_low:
        rate = math.log(high / low) / (t_high - t_low)
        result["method"] = f"between the {low:g} dp and {high:g} dp crossings"
    else:
        positive = v > 0.0
        if np.count_nonzero(positive) >= 2 and np.ptp(t[positive]) > 0.0:
            rate = float(np.polyfit(t[positive], np.log(v[positive]), 1)[0])
            result["method"] = "least-squares fit of ln(RMS) over the samples with RMS > 0"
    if rate is not None:
        result["rate_per_s"] = rate
        result["doubling_time_s"] = math.log(2.0) / rate if rate > 0.0 else None
    return result


def _probe_comparison(
    run_a: RunFolder, run_b: RunFolder, tolerance: float, comparison: Comparison
) -> None:
    """Compare every probe series present in both runs; fills comparison.probes."""
    t_a, series_a = run_a.probes()
    t_b, series_b = run_b.probes()
    names = [n for n in series_a if n in series_b]
    for name in sorted(set(series_a) ^ set(series_b)):
        comparison.notes.append(f"probe {name} is in one run only; not compared")
    for name in names:
        a, b = series_a[name], series_b[name]
        inside = (t_a >= t_b[0] - 1e-12) & (t_a <= t_b[-1] + 1e-12) if t_b.size else t_a < 0
        entry: dict[str, Any] = {"samples": int(np.count_nonzero(inside))}
        if not np.any(inside):
            entry.update(relative_rms=None, rms=None, range_a=None, ok=False)
            comparison.failures.append(f"probe {name}: no common sample times")
            comparison.probes[name] = entry
            continue
        b_on_a = np.interp(t_a[inside], t_b, b)
        diff = b_on_a - a[inside]
        rms = float(np.sqrt(np.mean(diff * diff)))
        span = float(np.ptp(a[inside]))
        if span > 0.0:
            relative = rms / span
        else:
            relative = 0.0 if rms == 0.0 else math.inf
        ok = relative <= tolerance
        entry.update(
            rms=rms, range_a=span, relative_rms=relative, max_abs=float(np.max(np.abs(diff))), ok=ok
        )
        if not ok:
            comparison.failures.append(
                f"probe {name}: RMS difference {fmt(relative)} of A's range > {tolerance:g}"
            )
        comparison.probes[name] = entry
        comparison.probe_series[name] = (t_a, a, t_b, b)


def compare_runs(
    run_a: RunFolder,
    run_b: RunFolder,
    tolerances: Tolerances = Tolerances(),
    *,
    front_percentile: float = DEFAULT_FRONT_PERCENTILE,
    front_band_dp: float = DEFAULT_FRONT_BAND_DP,
) -> Comparison:
    """Compare two runs (see the module docstring); IncompatibleRunsError if they cannot be."""
    differences = config_differences(run_a.config_dict, run_b.config_dict)
    if differences:
        raise IncompatibleRunsError(
            f"the configs differ (only {', '.join(IGNORED_CONFIG_KEYS)} may):\n  "
            + "\n  ".join(differences)
        )
    if run_a.snapshot_count == 0 or run_b.snapshot_count == 0:
        empty = run_a.path if run_a.snapshot_count == 0 else run_b.path
        raise IncompatibleRunsError(f"{empty} has no snapshots (particles.pvd)")
    pairs = common_times(run_a.times, run_b.times)
    if not pairs or pairs[0] != (0, 0):
        raise IncompatibleRunsError(
            f"the first snapshots are not at the same time (A: t = {run_a.times[0]:g} s, "
            f"B: t = {run_b.times[0]:g} s)"
        )
    cfg_a, cfg_b = run_a.config, run_b.config
    dp = cfg_a.dp
    comparison = Comparison(
        run_a=str(run_a.path),
        run_b=str(run_b.path),
        tolerances=tolerances,
        dp=dp,
        summary_a=run_a.summary,
        summary_b=run_b.summary,
    )
    checks: dict[str, list[float]] = {name: [] for name, _, _ in CHECKS}
    count_a0 = count_b0 = 0
    for number, (i, j) in enumerate(pairs):
        snap_a, snap_b = run_a.snapshot(i), run_b.snapshot(j)
        if number == 0:
            _check_ids(snap_a, snap_b)
            count_a0, count_b0 = snap_a.count, snap_b.count
        m_a = compute_metrics(
            snap_a, cfg_a, front_percentile=front_percentile, front_band_dp=front_band_dp
        )
        m_b = compute_metrics(
            snap_b, cfg_b, front_percentile=front_percentile, front_band_dp=front_band_dp
        )
        comparison.times.append(float(run_a.times[i]))
        comparison.metrics_a.append(m_a)
        comparison.metrics_b.append(m_b)
        comparison.removed_a.append(count_a0 - snap_a.count)
        comparison.removed_b.append(count_b0 - snap_b.count)
        comparison.particles.append(particle_difference(snap_a, snap_b, dp))

    first = comparison.metrics_a[0]
    e_ref = first.potential_energy
    if not e_ref > 0.0:
        e_ref = max(abs(m.kinetic_energy) + abs(m.potential_energy) for m in comparison.metrics_a)
        comparison.notes.append(
            "the initial potential energy is not positive; energies are relative to the largest "
            "total energy of run A instead"
        )
    e_ref = e_ref if e_ref > 0.0 else 1.0
    m_ref = first.mass if first.mass > 0.0 else 1.0
    comparison.energy_reference = e_ref
    for m_a, m_b in zip(comparison.metrics_a, comparison.metrics_b, strict=True):
        checks["kinetic_energy"].append(abs(m_a.kinetic_energy - m_b.kinetic_energy) / e_ref)
        checks["potential_energy"].append(abs(m_a.potential_energy - m_b.potential_energy) / e_ref)
        d_com = np.subtract(m_a.centre_of_mass, m_b.centre_of_mass)
        com = float(np.sqrt(np.sum(d_com * d_com))) / dp
        checks["centre_of_mass"].append(0.0 if math.isnan(com) and m_a.fluid_count == 0 else com)
        if math.isnan(m_a.front) and math.isnan(m_b.front):
            checks["front"].append(0.0)
        elif math.isnan(m_a.front) or math.isnan(m_b.front):
            checks["front"].append(math.inf)
        else:
            checks["front"].append(abs(m_a.front - m_b.front) / dp)
        checks["mass"].append(abs(m_a.mass - m_b.mass) / m_ref)
    comparison.checks = checks
    for name, meaning, attribute in CHECKS:
        limit = getattr(tolerances, attribute)
        bad = [
            (t, v) for t, v in zip(comparison.times, checks[name], strict=True) if not v <= limit
        ]
        if bad:
            t_first, _ = bad[0]
            worst_t, worst_v = max(bad, key=lambda item: item[1])
            comparison.failures.append(
                f"{name}: {meaning} exceeds {limit:g} at {len(bad)} of {len(checks[name])} "
                f"times (first at t = {t_first:g} s; worst {fmt(worst_v)} at t = {worst_t:g} s)"
            )
    _probe_comparison(run_a, run_b, tolerances.probe, comparison)
    comparison.growth = divergence_growth(
        np.array(comparison.times), np.array([p.position_rms_dp for p in comparison.particles])
    )
    only_a, only_b = len(run_a.times) - len(pairs), len(run_b.times) - len(pairs)
    if only_a or only_b:
        comparison.notes.append(
            f"{only_a} snapshot(s) of A and {only_b} of B have no counterpart and were skipped"
        )
    return comparison


# ------------------------------------------------------------------------------ report


def _run_label(summary: dict[str, Any], config_precision: str | None = None) -> str:
    """ "backend device, precision, N threads" from a summary.json, as far as it tells."""
    parts = []
    if summary.get("backend"):
        device = f" ({summary['device']})" if summary.get("device") else ""
        parts.append(f"{summary['backend']}{device}")
    precision = summary.get("precision", config_precision)
    if precision:
        parts.append(str(precision))
    if summary.get("threads"):
        parts.append(f"{summary['threads']} threads")
    return ", ".join(parts) or "no summary.json"


def _plot(comparison: Comparison, out_dir: Path) -> list[Path]:
    """The report's figures: energies, front and centre of mass, divergence, probes."""
    from solver.validation.plots import pyplot, save_figure

    plt = pyplot()
    t = np.array(comparison.times)
    a, b = comparison.metrics_a, comparison.metrics_b
    label_a, label_b = f"A: {Path(comparison.run_a).name}", f"B: {Path(comparison.run_b).name}"
    files: list[Path] = []

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for key, name in (("kinetic_energy", "kinetic"), ("potential_energy", "potential")):
        line = top.plot(t, [getattr(m, key) for m in a], label=f"{name}, {label_a}")[0]
        top.plot(t, [getattr(m, key) for m in b], "--", color=line.get_color(), label=f"{name}, B")
        bottom.plot(t, comparison.checks[key], label=f"|d E_{name[0]}| / E_p(t0)")
    bottom.axhline(comparison.tolerances.energy, color="red", lw=0.8, label="tolerance")
    top.set_ylabel("energy of the fluid [J]")
    top.legend(fontsize=8)
    bottom.set_ylabel("relative difference")
    bottom.set_xlabel("t [s]")
    bottom.legend(fontsize=8)
    files.append(save_figure(fig, out_dir / "energies.png"))

    dp = comparison.dp
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    top.plot(t, [m.front for m in a], label=label_a)
    top.plot(t, [m.front for m in b], "--", label=label_b)
    top.set_ylabel("front x [m]")
    top.legend(fontsize=8)
    for axis, name in ((0, "x"), (2, "z")):
        line = bottom.plot(t, [m.centre_of_mass[axis] for m in a], label=f"com {name}, A")[0]
        bottom.plot(
            t,
            [m.centre_of_mass[axis] for m in b],
            "--",
            color=line.get_color(),
            label=f"com {name}, B",
        )
    bottom.set_ylabel("centre of mass [m]")
    bottom.set_xlabel("t [s]")
    bottom.legend(fontsize=8)
    top.set_title(
        f"front and centre of mass (tolerances {comparison.tolerances.front_dp:g} dp, "
        f"{comparison.tolerances.com_dp:g} dp; dp = {dp:g} m)",
        fontsize=9,
    )
    files.append(save_figure(fig, out_dir / "front_com.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    rms = np.array([p.position_rms_dp for p in comparison.particles])
    peak = np.array([p.position_max_dp for p in comparison.particles])
    for values, label in ((rms, "RMS"), (peak, "max")):
        shown = np.where(values > 0.0, values, np.nan)
        ax.semilogy(t, shown, marker=".", label=f"{label} position difference")
    positive = np.concatenate([rms[rms > 0.0], peak[peak > 0.0]])
    if positive.size == 0:  # nothing to draw on a log scale: show the reference levels
        ax.set_ylim(1e-3, 10.0)
    for level in DIVERGENCE_LEVELS_DP:
        ax.axhline(level, color="grey", lw=0.6, ls=":")
    if comparison.growth.get("identical"):
        ax.text(
            0.5, 0.5, "identical trajectories (difference 0)", transform=ax.transAxes, ha="center"
        )
    ax.set_xlabel("t [s]")
    ax.set_ylabel("fluid particle position difference [dp]")
    ax.set_title("particle divergence (matched by id)", fontsize=9)
    ax.legend(fontsize=8)
    files.append(save_figure(fig, out_dir / "divergence.png"))

    names = list(comparison.probe_series)
    if names:
        cols = min(4, len(names))
        rows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            ta, va, tb, vb = comparison.probe_series[name]
            ax.plot(ta, va, lw=1, label="A")
            ax.plot(tb, vb, "--", lw=1, label="B")
            ax.set_title(name, fontsize=9)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.supxlabel("t [s]")
        files.append(save_figure(fig, out_dir / "probes.png"))
    return files


def write_report(comparison: Comparison, out_dir: Path, *, plots: bool = True) -> Path:
    """Write report.md, report.json and the PNG figures into `out_dir`; returns report.md."""
    from solver.output.files import atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    figures = _plot(comparison, out_dir) if plots else []
    tol = comparison.tolerances
    limits = {name: getattr(tol, attribute) for name, _, attribute in CHECKS}
    verdict = "AGREE" if comparison.agree else "DISAGREE"
    precision_a = comparison.summary_a.get("precision")
    precision_b = comparison.summary_b.get("precision")

    lines = [
        "# Run comparison",
        "",
        f"- A: `{comparison.run_a}` ({_run_label(comparison.summary_a, precision_a)})",
        f"- B: `{comparison.run_b}` ({_run_label(comparison.summary_b, precision_b)})",
        f"- common snapshot times: {len(comparison.times)}, "
        f"from {comparison.times[0]:g} s to {comparison.times[-1]:g} s; dp = {comparison.dp:g} m",
        "",
        f"## Verdict: {verdict} (exit status {comparison.exit_status})",
        "",
    ]
    if comparison.failures:
        lines += [f"- {failure}" for failure in comparison.failures] + [""]
    else:
        lines += [
            "Every macroscopic quantity agrees within its tolerance at every common time.",
            "",
        ]
    lines += [
        "Tolerances used (energies relative to the initial potential energy of A, "
        f"E_p(t0) = {fmt(comparison.energy_reference)} J; mass relative to A's initial fluid "
        "mass; probes: RMS of B - A over A's range):",
        "",
        markdown_table(
            ["quantity", "measure", "tolerance", "worst", "ok"],
            [
                [
                    name,
                    meaning,
                    limits[name],
                    comparison.worst(name),
                    comparison.worst(name) <= limits[name],
                ]
                for name, meaning, _ in CHECKS
            ]
            + [
                [
                    f"probe {name}",
                    "RMS(B - A) / range(A)",
                    tol.probe,
                    entry.get("relative_rms"),
                    bool(entry.get("ok")),
                ]
                for name, entry in comparison.probes.items()
            ],
        ),
        "",
        "## Particle divergence (reported, not part of the verdict)",
        "",
    ]
    growth = comparison.growth
    if growth.get("identical"):
        lines.append("The fluid particle positions are identical at every common time.")
    else:
        lines.append("Fluid particles matched by id; RMS position difference in dp:")
        lines.append("")
        for level, when in growth["time_to_level"].items():
            text = f"t = {when:.4g} s" if when is not None else "not reached"
            lines.append(f"- reaches {level} dp: {text}")
        if growth.get("rate_per_s") is not None:
            doubling = growth.get("doubling_time_s")
            extra = f", doubling time {doubling:.3g} s" if doubling else ""
            lines.append(
                f"- exponential growth rate {growth['rate_per_s']:.3g} 1/s{extra} "
                f"({growth['method']})"
            )
        lines.append(f"- at the last common time: {fmt(growth.get('final_rms_dp'))} dp")
    lines += ["", "## At every common time", ""]
    rows = []
    for k, time in enumerate(comparison.times):
        p = comparison.particles[k]
        ma, mb = comparison.metrics_a[k], comparison.metrics_b[k]
        rows.append(
            [
                time,
                ma.kinetic_energy,
                mb.kinetic_energy,
                comparison.checks["kinetic_energy"][k],
                comparison.checks["potential_energy"][k],
                comparison.checks["centre_of_mass"][k],
                ma.front,
                mb.front,
                comparison.checks["front"][k],
                comparison.checks["mass"][k],
                f"{comparison.removed_a[k]} / {comparison.removed_b[k]}",
                p.position_rms_dp,
                p.position_max_dp,
                p.velocity_rms,
                p.velocity_max,
                f"{p.only_a} / {p.only_b}",
            ]
        )
    lines.append(
        markdown_table(
            [
                "t [s]",
                "E_k A [J]",
                "E_k B [J]",
                "dE_k/E_p0",
                "dE_p/E_p0",
                "d com [dp]",
                "front A [m]",
                "front B [m]",
                "d front [dp]",
                "dM/M0",
                "removed A / B",
                "RMS dx [dp]",
                "max dx [dp]",
                "RMS dv [m/s]",
                "max dv [m/s]",
                "only in A / B",
            ],
            rows,
        )
    )
    if comparison.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in comparison.notes]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f.stem}]({f.name})" for f in figures]
    report = out_dir / "report.md"
    atomic_write_text(report, "\n".join(lines) + "\n")

    write_json(
        out_dir / "report.json",
        {
            "run_a": comparison.run_a,
            "run_b": comparison.run_b,
            "summary_a": comparison.summary_a,
            "summary_b": comparison.summary_b,
            "verdict": verdict.lower(),
            "exit_status": comparison.exit_status,
            "failures": comparison.failures,
            "notes": comparison.notes,
            "tolerances": asdict(tol),
            "dp": comparison.dp,
            "energy_reference_J": comparison.energy_reference,
            "worst": {name: comparison.worst(name) for name, _, _ in CHECKS},
            "times": comparison.times,
            "checks": comparison.checks,
            "metrics_a": [m.as_dict() for m in comparison.metrics_a],
            "metrics_b": [m.as_dict() for m in comparison.metrics_b],
            "removed_a": comparison.removed_a,
            "removed_b": comparison.removed_b,
            "particles": [asdict(p) for p in comparison.particles],
            "divergence_growth": comparison.growth,
            "probes": comparison.probes,
            "figures": [f.name for f in figures],
        },
    )
    return report


# ------------------------------------------------------------------------------ command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `dambreak compare`."""
    defaults = Tolerances()
    parser.add_argument("run_a", metavar="RUN_A", help="run folder A (the reference)")
    parser.add_argument("run_b", metavar="RUN_B", help="run folder B")
    parser.add_argument("--out", help="report folder (default RUN_A/compare_<name of RUN_B>)")
    parser.add_argument(
        "--tol-energy",
        type=float,
        default=defaults.energy,
        help="kinetic and potential energy difference, relative to the initial "
        "potential energy (default %(default)g)",
    )
    parser.add_argument(
        "--tol-com-dp",
        type=float,
        default=defaults.com_dp,
        help="centre-of-mass distance in dp (default %(default)g)",
    )
    parser.add_argument(
        "--tol-front-dp",
        type=float,
        default=defaults.front_dp,
        help="front position difference in dp (default %(default)g)",
    )
    parser.add_argument(
        "--tol-mass",
        type=float,
        default=defaults.mass,
        help="fluid mass difference, relative (default %(default)g)",
    )
    parser.add_argument(
        "--tol-probe",
        type=float,
        default=defaults.probe,
        help="probe RMS difference over the range of A's series (default %(default)g)",
    )
    parser.add_argument(
        "--front-percentile",
        type=float,
        default=DEFAULT_FRONT_PERCENTILE,
        help="percentile of x of near-floor fluid taken as the front (default %(default)g)",
    )
    parser.add_argument(
        "--front-band-dp",
        type=float,
        default=DEFAULT_FRONT_BAND_DP,
        help="height of the near-floor band, in dp (default %(default)g)",
    )


def main(args: argparse.Namespace) -> int:
    """Run `dambreak compare`; returns 0 (agree), 1 (disagree) or 2 (cannot compare)."""
    import sys

    tolerances = Tolerances(
        energy=args.tol_energy,
        com_dp=args.tol_com_dp,
        front_dp=args.tol_front_dp,
        mass=args.tol_mass,
        probe=args.tol_probe,
    )
    try:
        run_a, run_b = RunFolder.open(args.run_a), RunFolder.open(args.run_b)
        comparison = compare_runs(
            run_a,
            run_b,
            tolerances,
            front_percentile=args.front_percentile,
            front_band_dp=args.front_band_dp,
        )
    except (RunFolderError, IncompatibleRunsError) as exc:
        print(
            f"dambreak compare: cannot compare {args.run_a} and {args.run_b}: {exc}",
            file=sys.stderr,
        )
        return 2
    out_dir = Path(args.out) if args.out else run_a.path / f"compare_{run_b.name}"
    report = write_report(comparison, out_dir)

    growth = comparison.growth
    print(
        f"compared {run_a.path} ({_run_label(run_a.summary)}) with {run_b.path} "
        f"({_run_label(run_b.summary)}) at {len(comparison.times)} common times"
    )
    for name, meaning, _ in CHECKS:
        print(f"  worst {meaning:<20} {fmt(comparison.worst(name))}")
    for name, entry in comparison.probes.items():
        print(f"  probe {name:<15} RMS / range {fmt(entry.get('relative_rms'))}")
    if growth.get("identical"):
        print("  particles: identical positions at every common time")
    else:
        reach = ", ".join(
            f"{level} dp " + (f"at t = {when:.3g} s" if when is not None else "not reached")
            for level, when in growth["time_to_level"].items()
        )
        rate = growth.get("rate_per_s")
        rate_text = f"; growth rate {rate:.3g} 1/s" if rate is not None else ""
        print(f"  particle RMS divergence: {reach}{rate_text}")
    if comparison.agree:
        print("verdict: AGREE (macroscopic quantities within tolerances)")
    else:
        print("verdict: DISAGREE")
        for failure in comparison.failures:
            print(f"  {failure}")
    print(f"report: {report}")
    return comparison.exit_status
