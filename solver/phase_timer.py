"""Wall time per phase of a time step, for benchmarks; a no-op unless asked for.

GPU kernel launches return before the work is done, so a phase is only timed right when the
device is drained at both ends: `PhaseTimer` synchronises before and after each phase. That
adds a few microseconds per phase and removes the overlap between host and device, so phase
times add up to a little more than an unsynchronised step; benchmarks report both.
"""

import contextlib
import time
from collections.abc import Iterator

import taichi as ti


class PhaseTimer:
    """Accumulates synchronised wall seconds per phase name, in order of first use."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        ti.sync()
        started = time.perf_counter()
        yield
        ti.sync()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


_UNTIMED = contextlib.nullcontext()


def untimed(name: str) -> contextlib.nullcontext:
    """The phase hook of an ordinary run: does nothing."""
    return _UNTIMED
