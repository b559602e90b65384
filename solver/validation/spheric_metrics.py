"""The yardstick of SPHERIC test 2 comparisons: series averaged over fixed time windows.

Probe and measured series are sampled at different rates and impacts last a few milliseconds,
so point-by-point differences mostly measure phase noise. The yardstick compares window means
instead: both series are cut to the time span they share, averaged over consecutive windows
whose edges lie at multiples of the width from t = 0 (window k is [k w, (k + 1) w); a sample
within 1e-9 w of an edge belongs to the window that starts there), and a window counts only
when both series have finite samples in it. Window widths: 50 ms for water heights, 20 ms for
pressures. A window's time is its centre.

Heights (`height_metrics`): RMS and mean (bias, a - b) of the difference of window means, over
the whole common span and over the windows within the first 2 s.

Pressures (`pressure_metrics`): RMS of the difference; the peak of each series' window means
and its time, with the ratio a / b of the peaks and the time difference a - b; the mean of the
window means within 1 to 3 s of each and their ratio; the minimum window mean of each (a
negative one is the tension artefact of weakly compressible SPH at impacts); and the impulse of
the first impact (`first_impact`): the time integral of pressure over 100 ms from the first
sample at or above 1 kPa, with its ratio a / b and the arrival-time difference a - b.

A run's own figures, with or without a measurement (`height_figures`, `pressure_figures`):
the mean of a height's window means over the first 2 s and after; a pressure's peak window
mean and its time, its level within 1 to 3 s, its first impact and its tension.

Tension (`tension`): the smallest 20 ms window mean of a pressure series, its time, and how
long its window means stay below -TENSION_PA. Water in contact with the air carries no tension
worth a kilopascal; a weakly compressible fluid does wherever its density falls below rho0, so
a negative window that shrinks as dp does is a discretisation error (validation/README.md,
section 3).

Why the impulse: the peak of an impact pressure is the least repeatable quantity of a wave
impact, in experiments and in models, while its time integral, the pressure impulse, is set by
the momentum the water brings and is repeatable (Bagnold 1939, "Interim report on wave-pressure
research", J. Inst. Civil Eng. 12; Peregrine 2003, "Water-wave impact on walls", Annu. Rev.
Fluid Mech. 35, 23-43). In weakly compressible SPH the impact rings at the artificial sound
speed with an amplitude rho0 c0 v, so a 20 ms window mean of the peak depends on c0 and on where
the ringing falls in the window; the impulse depends on them much less (on P1 of SPHERIC test
2 it converges with dp where the peak does not: validation/README.md, section 3).

`a` is the simulation and `b` the measurement in a validation; in a convergence study `a` is
the coarser run and `b` the next finer one (`window_rms_difference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ARRIVAL_PA",
    "EARLY_END_S",
    "HEIGHT_WINDOW_S",
    "IMPULSE_SPAN_S",
    "LEVEL_SPAN_S",
    "PRESSURE_WINDOW_S",
    "TENSION_PA",
    "WindowPairs",
    "first_impact",
    "height_figures",
    "height_metrics",
    "paired_window_means",
    "pressure_figures",
    "pressure_metrics",
    "tension",
    "window_means",
    "window_rms_difference",
    "window_width",
    "yardstick",
]

#: Window width for water heights [s].
HEIGHT_WINDOW_S = 0.05
#: Window width for pressures [s].
PRESSURE_WINDOW_S = 0.02
#: Height metrics are also given over the windows within [0, EARLY_END_S] [s].
EARLY_END_S = 2.0
#: Pressure level: the mean of the window means within this span [s].
LEVEL_SPAN_S = (1.0, 3.0)

#: A pressure sensor is reached by the water at its first sample at or above this [Pa].
ARRIVAL_PA = 1000.0
#: The first impact's impulse integrates pressure over this span from the arrival [s].
IMPULSE_SPAN_S = 0.1

#: A pressure window mean below -TENSION_PA counts as tension [Pa]: well above the noise of a
#: dry sensor's window (0 exactly) and a hundredth of the impact peaks.
TENSION_PA = 100.0

#: Tolerance on window edges, as a fraction of the width (samples at 0.15 s are in [0.15, 0.2)).
_EDGE_TOLERANCE = 1e-9


def window_width(name: str) -> float:
    """The window width of a series by its name: heights (H...) 50 ms, pressures (P...) 20 ms."""
    return HEIGHT_WINDOW_S if name.startswith("H") else PRESSURE_WINDOW_S


def window_means(t: np.ndarray, y: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Means of `y` over the windows [k width, (k + 1) width) that hold finite samples.

    Returns the window numbers k (ascending) and the mean of each; non-finite samples are left
    out.
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    good = np.isfinite(t) & np.isfinite(y)
    index = np.floor(t[good] / width + _EDGE_TOLERANCE).astype(np.int64)
    windows, which = np.unique(index, return_inverse=True)
    sums = np.bincount(which, weights=y[good], minlength=windows.size)
    counts = np.bincount(which, minlength=windows.size)
    return windows, sums / np.maximum(counts, 1)


@dataclass(frozen=True)
class WindowPairs:
    """Window means of two series over the windows both have samples in."""

    width: float
    span: tuple[float, float] | None
    """The common time span [s] the samples were cut to (None if the series do not overlap)."""
    index: np.ndarray
    a: np.ndarray
    b: np.ndarray

    @property
    def times(self) -> np.ndarray:
        """The windows' centres [s]."""
        return (self.index + 0.5) * self.width

    def within(self, start: float, end: float) -> WindowPairs:
        """The windows lying wholly inside [start, end]."""
        keep = _wholly_within(self.index, self.width, start, end)
        return WindowPairs(self.width, self.span, self.index[keep], self.a[keep], self.b[keep])

    def rms(self) -> float | None:
        """RMS of a - b over the windows; None without windows."""
        if not self.index.size:
            return None
        diff = self.a - self.b
        return float(np.sqrt(np.mean(diff * diff)))

    def bias(self) -> float | None:
        """Mean of a - b over the windows; None without windows."""
        return float(np.mean(self.a - self.b)) if self.index.size else None


def _finite_span(t: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """First and last time with a finite value, or None if there is none."""
    good = np.isfinite(t) & np.isfinite(y)
    return (float(t[good][0]), float(t[good][-1])) if np.any(good) else None


def paired_window_means(
    t_a: np.ndarray, y_a: np.ndarray, t_b: np.ndarray, y_b: np.ndarray, width: float
) -> WindowPairs:
    """Window means of a and b over their common time span, in the windows both have samples
    in (module doc)."""
    t_a, y_a = np.asarray(t_a, np.float64), np.asarray(y_a, np.float64)
    t_b, y_b = np.asarray(t_b, np.float64), np.asarray(y_b, np.float64)
    span_a, span_b = _finite_span(t_a, y_a), _finite_span(t_b, y_b)
    empty = np.zeros(0)
    if span_a is None or span_b is None:
        return WindowPairs(width, None, empty.astype(np.int64), empty, empty)
    start, end = max(span_a[0], span_b[0]), min(span_a[1], span_b[1])
    if end < start:
        return WindowPairs(width, None, empty.astype(np.int64), empty, empty)
    in_a = (t_a >= start) & (t_a <= end)
    in_b = (t_b >= start) & (t_b <= end)
    k_a, mean_a = window_means(t_a[in_a], y_a[in_a], width)
    k_b, mean_b = window_means(t_b[in_b], y_b[in_b], width)
    index, at_a, at_b = np.intersect1d(k_a, k_b, assume_unique=True, return_indices=True)
    return WindowPairs(width, (start, end), index, mean_a[at_a], mean_b[at_b])


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is undefined or b is 0."""
    if a is None or b is None or b == 0.0:
        return None
    return a / b


def _common(pairs: WindowPairs) -> dict[str, Any]:
    """What every comparison reports: the width, the common span and the windows counted."""
    return {
        "window_s": pairs.width,
        "span_s": list(pairs.span) if pairs.span is not None else None,
        "windows": int(pairs.index.size),
        "rms": pairs.rms(),
    }


def height_metrics(
    t_sim: np.ndarray, y_sim: np.ndarray, t_exp: np.ndarray, y_exp: np.ndarray
) -> dict[str, Any]:
    """Water-height yardstick [m]: RMS and bias (sim - exp) of the 50 ms window means, over
    the whole common span and (`first_2s`) over the windows within the first 2 s."""
    pairs = paired_window_means(t_sim, y_sim, t_exp, y_exp, HEIGHT_WINDOW_S)
    early = pairs.within(0.0, EARLY_END_S)
    return _common(pairs) | {
        "bias": pairs.bias(),
        "first_2s": {"windows": int(early.index.size), "rms": early.rms(), "bias": early.bias()},
    }


def _extreme(times: np.ndarray, values: np.ndarray, pick: Any) -> tuple[float | None, float | None]:
    """(value, time) of the window mean chosen by `pick` (np.argmax or np.argmin)."""
    if not values.size:
        return None, None
    k = int(pick(values))
    return float(values[k]), float(times[k])


def first_impact(t: np.ndarray, p: np.ndarray) -> tuple[float | None, float | None]:
    """(arrival time [s], impulse [Pa s]) of a pressure series' first impact (module doc).

    The arrival is the first finite sample at or above ARRIVAL_PA; the impulse is the
    trapezoidal integral of p over [arrival, arrival + IMPULSE_SPAN_S], the end value
    interpolated between samples. (None, None) when the series never reaches ARRIVAL_PA; the
    impulse is None when the series ends before the span does.
    """
    t = np.asarray(t, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    good = np.isfinite(t) & np.isfinite(p)
    t, p = t[good], p[good]
    reached = np.flatnonzero(p >= ARRIVAL_PA)
    if not reached.size:
        return None, None
    first = int(reached[0])
    arrival = float(t[first])
    end = arrival + IMPULSE_SPAN_S
    if t[-1] < end:
        return arrival, None
    inside = (t >= arrival) & (t < end)
    times = np.append(t[inside], end)
    values = np.append(p[inside], np.interp(end, t, p))
    steps = np.diff(times)
    return arrival, float(np.sum(0.5 * (values[1:] + values[:-1]) * steps))


def tension(t: np.ndarray, p: np.ndarray) -> dict[str, float | None]:
    """The tension of a pressure series (module doc): the smallest 20 ms window mean
    (`smallest` [Pa], None without samples) and the centre of its window (`at` [s]), and the
    total width of the windows whose mean is below -TENSION_PA (`seconds`)."""
    windows, means = window_means(t, p, PRESSURE_WINDOW_S)
    if not means.size:
        return {"smallest": None, "at": None, "seconds": 0.0}
    k = int(np.argmin(means))
    below = int(np.count_nonzero(means < -TENSION_PA))
    return {
        "smallest": float(means[k]),
        "at": float((windows[k] + 0.5) * PRESSURE_WINDOW_S),
        "seconds": below * PRESSURE_WINDOW_S,
    }


def _wholly_within(windows: np.ndarray, width: float, start: float, end: float) -> np.ndarray:
    """Which of the windows (numbers k of [k width, (k + 1) width)) lie wholly in [start, end],
    within the edge tolerance."""
    tol = _EDGE_TOLERANCE * width
    return (windows * width >= start - tol) & ((windows + 1) * width <= end + tol)


def height_figures(t: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """A water height's own figures [m] (module doc): the mean of its 50 ms window means over
    the first EARLY_END_S (`mean_first_2s`) and after (`mean_after_2s`), None where the series
    has no window."""
    windows, means = window_means(t, y, HEIGHT_WINDOW_S)
    early = _wholly_within(windows, HEIGHT_WINDOW_S, 0.0, EARLY_END_S)
    return {
        "mean_first_2s": float(means[early].mean()) if early.any() else None,
        "mean_after_2s": float(means[~early].mean()) if (~early).any() else None,
    }


def pressure_figures(t: np.ndarray, p: np.ndarray) -> dict[str, Any]:
    """A pressure's own figures [Pa] (module doc): the peak of its 20 ms window means and the
    centre of that window, its level (the mean of the window means within LEVEL_SPAN_S, with
    their count; None without one), its first impact (`first_impact`) and its `tension`."""
    windows, means = window_means(t, p, PRESSURE_WINDOW_S)
    peak = peak_time = None
    if means.size:
        k = int(np.argmax(means))
        peak, peak_time = float(means[k]), float((windows[k] + 0.5) * PRESSURE_WINDOW_S)
    level = _wholly_within(windows, PRESSURE_WINDOW_S, *LEVEL_SPAN_S)
    arrival, impulse = first_impact(t, p)
    return {
        "peak": peak,
        "peak_time": peak_time,
        "level": float(means[level].mean()) if level.any() else None,
        "level_windows": int(level.sum()),
        "arrival": arrival,
        "impulse": impulse,
        "tension": tension(t, p),
    }


def pressure_metrics(
    t_sim: np.ndarray, y_sim: np.ndarray, t_exp: np.ndarray, y_exp: np.ndarray
) -> dict[str, Any]:
    """Pressure yardstick [Pa] of the 20 ms window means (module doc): RMS of the difference,
    peaks and their times, their ratio sim/exp and time difference sim - exp, mean levels
    within 1 to 3 s and their ratio, the minimum of each, and the first impact's arrival and
    impulse (`first_impact`, over the common span) of each with their difference and ratio."""
    pairs = paired_window_means(t_sim, y_sim, t_exp, y_exp, PRESSURE_WINDOW_S)
    arrival_sim = impulse_sim = arrival_exp = impulse_exp = None
    if pairs.span is not None:
        start, end = pairs.span
        t_sim, y_sim = np.asarray(t_sim, np.float64), np.asarray(y_sim, np.float64)
        t_exp, y_exp = np.asarray(t_exp, np.float64), np.asarray(y_exp, np.float64)
        cut_sim = (t_sim >= start) & (t_sim <= end)
        cut_exp = (t_exp >= start) & (t_exp <= end)
        arrival_sim, impulse_sim = first_impact(t_sim[cut_sim], y_sim[cut_sim])
        arrival_exp, impulse_exp = first_impact(t_exp[cut_exp], y_exp[cut_exp])
    times = pairs.times
    peak_sim, peak_sim_time = _extreme(times, pairs.a, np.argmax)
    peak_exp, peak_exp_time = _extreme(times, pairs.b, np.argmax)
    level = pairs.within(*LEVEL_SPAN_S)
    level_sim = float(np.mean(level.a)) if level.index.size else None
    level_exp = float(np.mean(level.b)) if level.index.size else None
    return _common(pairs) | {
        "peak_sim": peak_sim,
        "peak_sim_time": peak_sim_time,
        "peak_exp": peak_exp,
        "peak_exp_time": peak_exp_time,
        "peak_ratio": _ratio(peak_sim, peak_exp),
        "peak_time_difference": (
            peak_sim_time - peak_exp_time if peak_sim_time is not None else None
        ),
        "level_span_s": list(LEVEL_SPAN_S),
        "level_windows": int(level.index.size),
        "level_sim": level_sim,
        "level_exp": level_exp,
        "level_ratio": _ratio(level_sim, level_exp),
        "min_sim": _extreme(times, pairs.a, np.argmin)[0],
        "min_exp": _extreme(times, pairs.b, np.argmin)[0],
        "arrival_sim": arrival_sim,
        "arrival_exp": arrival_exp,
        "arrival_difference": (
            arrival_sim - arrival_exp
            if arrival_sim is not None and arrival_exp is not None
            else None
        ),
        "impulse_sim": impulse_sim,
        "impulse_exp": impulse_exp,
        "impulse_ratio": _ratio(impulse_sim, impulse_exp),
    }


def yardstick(
    name: str, t_sim: np.ndarray, y_sim: np.ndarray, t_exp: np.ndarray, y_exp: np.ndarray
) -> dict[str, Any]:
    """The yardstick of a series by its name: `height_metrics` for H..., else
    `pressure_metrics`."""
    metrics = height_metrics if name.startswith("H") else pressure_metrics
    return metrics(t_sim, y_sim, t_exp, y_exp)


def window_rms_difference(
    name: str, t_a: np.ndarray, y_a: np.ndarray, t_b: np.ndarray, y_b: np.ndarray
) -> dict[str, Any]:
    """RMS of the difference of two runs' window means of series `name` (50 ms for heights,
    20 ms for pressures) over their common span, with the width, span and window count."""
    return _common(paired_window_means(t_a, y_a, t_b, y_b, window_width(name)))
