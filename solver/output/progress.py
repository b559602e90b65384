"""A one-line progress report for long runs: where the run is, how fast it goes, when it ends.

The line reads, for example:

    [##########--------------]  42.0% t 0.6300/1.5000 s  step 7312  dt 8.61e-05 s
    2.31e+07 particle-steps/s  ETA 0:01:23

(on one line). Throughput is counted in particle-steps per second, the figure the reference
codes publish (cases.md section 4), measured over the wall time since the previous printed
line. The ETA extrapolates the simulated-time rate since the first update (which comes after
the first step, so Taichi's compile time does not distort it).

On a terminal the line is redrawn in place with a carriage return; in a log file (not a TTY) a
new line is printed at most once per 10% of progress, so logs stay short.
"""

from __future__ import annotations

import math
import sys
import time as _time
from collections.abc import Callable
from typing import TextIO

#: Characters in the bar itself.
BAR_WIDTH = 24

#: Non-TTY streams get a line at most once per this fraction of the run.
LOG_FRACTION = 0.1


def format_duration(seconds: float) -> str:
    """h:mm:ss for a non-negative number of seconds; "--:--:--" when unknown or infinite."""
    if not math.isfinite(seconds) or seconds < 0.0:
        return "--:--:--"
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class ProgressBar:
    """Throttled progress line for a run that ends at simulated time `end_time`."""

    def __init__(
        self,
        end_time: float,
        *,
        stream: TextIO | None = None,
        min_interval: float = 0.5,
        clock: Callable[[], float] = _time.monotonic,
    ) -> None:
        """Report to `stream` (default sys.stderr) at most every `min_interval` wall seconds.

        `clock` gives wall time in seconds; tests pass a fake one.
        """
        if not end_time > 0.0:
            raise ValueError(f"end_time must be positive, got {end_time!r}")
        self.end_time = float(end_time)
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval = float(min_interval)
        self._clock = clock
        isatty = getattr(self.stream, "isatty", None)
        self.is_tty = bool(isatty()) if callable(isatty) else False

        self._start: tuple[float, float] | None = None  # (wall, simulated time) at first update
        self._last_print_wall = -math.inf
        self._last_print_decile = -1
        self._window_wall: float | None = None  # wall time the rate window began
        self._window_particle_steps = 0.0
        self._previous_step: int | None = None
        self._rate: float | None = None  # particle-steps per second, last measured
        self._latest: tuple[float, int, float] | None = None  # (time, step, dt) last updated
        self._latest_shown = False
        self._last_width = 0
        self._closed = False

    def update(self, time: float, step: int, dt: float, particles: int) -> None:
        """Record the state after `step` steps at simulated `time`; print if it is due.

        Cheap when not printing, so the time loop may call it every step.
        """
        if self._closed:
            return
        now = self._clock()
        if self._start is None:
            self._start = (now, float(time))
            self._window_wall = now
        elif self._previous_step is not None:
            self._window_particle_steps += float(particles) * max(step - self._previous_step, 0)
        self._previous_step = step
        self._latest = (float(time), int(step), float(dt))
        self._latest_shown = False

        finished = time >= self.end_time
        due = finished or now - self._last_print_wall >= self.min_interval
        if not self.is_tty:
            due = due and (finished or self._decile(time) > self._last_print_decile)
        if due:
            self._show(now)

    def close(self) -> None:
        """End the progress line, showing the final state first if it was not yet shown."""
        if self._closed:
            return
        self._closed = True
        if self._latest is not None and not self._latest_shown:
            self._show(self._clock())
        if self.is_tty and self._last_width:
            self.stream.write("\n")
        self.stream.flush()

    def _show(self, now: float) -> None:
        """Measure the throughput since the last shown line, then print the latest state."""
        assert self._latest is not None and self._window_wall is not None
        time, step, dt = self._latest
        elapsed = now - self._window_wall
        if elapsed > 0.0 and self._window_particle_steps > 0.0:
            self._rate = self._window_particle_steps / elapsed
            self._window_wall = now
            self._window_particle_steps = 0.0
        self._emit(self.format_line(time, step, dt, self._eta(now, time)))
        self._last_print_wall = now
        self._last_print_decile = self._decile(time)
        self._latest_shown = True

    def _decile(self, time: float) -> int:
        """Index of the LOG_FRACTION slice of the run that `time` falls in."""
        return int(math.floor(min(max(time / self.end_time, 0.0), 1.0) / LOG_FRACTION + 1e-9))

    def _eta(self, now: float, time: float) -> float:
        """Wall seconds left, from the simulated-time rate since the first update."""
        assert self._start is not None
        wall0, time0 = self._start
        if time >= self.end_time:
            return 0.0
        if now <= wall0 or time <= time0:
            return math.inf
        return (self.end_time - time) * (now - wall0) / (time - time0)

    def format_line(self, time: float, step: int, dt: float, eta: float) -> str:
        """The progress line for the given state (no line ending)."""
        fraction = min(max(time / self.end_time, 0.0), 1.0)
        filled = int(round(fraction * BAR_WIDTH))
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        rate = f"{self._rate:.2e}" if self._rate is not None else "-"
        return (
            f"[{bar}] {100.0 * fraction:5.1f}% t {time:.4f}/{self.end_time:.4f} s"
            f"  step {step}  dt {dt:.2e} s  {rate} particle-steps/s"
            f"  ETA {format_duration(eta)}"
        )

    def _emit(self, line: str) -> None:
        """Write `line`: redrawn in place on a TTY, as a new line otherwise."""
        if self.is_tty:
            padding = " " * max(self._last_width - len(line), 0)
            self.stream.write("\r" + line + padding)
        else:
            self.stream.write(line + "\n")
        self._last_width = len(line)
        self.stream.flush()
