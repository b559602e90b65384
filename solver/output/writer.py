"""The background writer: output files are written by one thread while the time loop steps on.

Writing a snapshot (compressing it, VTK's XML writer, the .pvd, fsync) took longer than the
physics between two snapshots of the seed case on the H200, and the device sat idle while the
host wrote. Now the time loop only copies what it wants written off the device (that copy must
happen while the state is at that time) and hands the writing over, as a job, to this writer.

One thread runs the jobs in the order they came, so files appear in the order the
synchronous code wrote them: a snapshot before the .pvd that lists it, probe rows in time
order, a checkpoint after every snapshot taken before it. zlib and VTK's writer let go of the
GIL while they work, so the thread runs alongside the time loop.

The queue is bounded by memory, not by a count of jobs: each job says how many bytes of host
arrays it holds, and `submit` blocks while the queued jobs would hold more than `max_bytes`
(a job is always let in when the queue is empty, however large). A deeper queue would not
write faster; it only smooths the bursts (a snapshot comes every hundred steps or so, a
checkpoint now and then) and costs memory, so the bound is set where a few snapshots of a
large case fit (see `DEFAULT_MAX_BYTES`).

Taichi holds the GIL while a kernel runs or the host waits for the device, and the time loop
of a GPU run is mostly Python preparing launches; a thread that lets go of the GIL for each
block it compresses or writes waits, each time it wants it back, until the loop's thread
hands it over, at most the interpreter's switch interval later (5 ms by default). Beside a
busy Python loop on the 2-core machine that made a deflated .npz of 263,784 particles take
533 ms instead of 212 ms alone, and 288 ms with a 1 ms interval, at no extra cost to the loop
(docs/performance.md, "Output"); `handover` sets that interval for the run.

A job that fails (disk full, folder made read-only) stops the writer: the jobs after it are
dropped (their files would sit beside a missing one), what was written before stays, and the
error is raised in the time loop's thread at its next call (`submit`, `drain` or `close`),
where the run reports it and exits 1.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

DEFAULT_MAX_BYTES = 1 << 30
"""Host arrays the queue may hold: 1 GiB. A queued snapshot holds 44 bytes a particle in f32
(the arrays it is cut from, solver/snapshot.py STATE_KEYS), so that is about 90 snapshots of
the seed case (11.6 MB each) or one of 24M particles; at 64M particles one is 2.8 GB, and the
queue then holds one while another is written and a third is copied, with the last good
state (6 GB) beside them: 14 GB, well within the H200 machine's 128 GiB (and a case that size
does not fit the 2-core machine's 23 GiB for its other arrays either)."""


SWITCH_INTERVAL_S = 0.001
"""The interpreter's switch interval while a run writes in the background [s]."""


@contextlib.contextmanager
def handover(interval: float = SWITCH_INTERVAL_S) -> Iterator[None]:
    """Within the block, a thread waiting for the GIL gets it within `interval` seconds.

    The interval only matters while a thread waits: an idle writer waits on its queue, not for
    the GIL, and costs the time loop nothing.
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def held_bytes(arrays: Iterable[Any]) -> int:
    """Host memory held by `arrays` (numpy arrays or scalars) [bytes]: what a job says it holds."""
    return sum(np.asarray(array).nbytes for array in arrays)


class OutputWriter:
    """Runs write jobs on one background thread, in order; see the module docstring."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Start the thread; the queue holds at most `max_bytes` of job data (see `submit`)."""
        self.max_bytes = int(max_bytes)
        self.waited_s = 0.0
        """Wall seconds the caller spent blocked in `submit`, `drain` and `close`."""
        self.busy_s = 0.0
        """Wall seconds the thread spent running jobs."""
        self._jobs: deque[tuple[Callable[[], None], int]] = deque()
        self._queued_bytes = 0
        self._running = False  # a job is being run (it has left the queue)
        self._closing = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        # A daemon thread, so that an interpreter leaving on an error never waits for it.
        self._thread = threading.Thread(target=self._work, name="output-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None], nbytes: int = 0) -> None:
        """Queue `job`, which holds `nbytes` of host memory until it has run.

        Blocks while the queue is over its bound; raises the error of a failed job instead.
        """
        with self._changed:
            self._raise_error()
            if self._closing:
                raise RuntimeError("the output writer is closed")
            started = time.perf_counter()
            while self._jobs and self._queued_bytes + nbytes > self.max_bytes:
                self._changed.wait()
                self._raise_error()
            self.waited_s += time.perf_counter() - started
            self._jobs.append((job, nbytes))
            self._queued_bytes += nbytes
            self._changed.notify_all()

    def drain(self) -> None:
        """Wait until every job submitted so far has run; raise the error of a failed job."""
        with self._changed:
            started = time.perf_counter()
            while (self._jobs or self._running) and self._error is None:
                self._changed.wait()
            self.waited_s += time.perf_counter() - started
            self._raise_error()

    def close(self) -> None:
        """Run what is queued, stop the thread and wait for it; raise a failed job's error.

        Interrupted (a second Ctrl-C while draining), it abandons the writer without waiting.
        """
        try:
            self.drain()
        except BaseException:
            self.abandon()
            if self._error is not None:
                self._thread.join()  # it ends by itself after the failed job
            raise
        self.abandon()
        started = time.perf_counter()
        self._thread.join()
        self.waited_s += time.perf_counter() - started

    def abandon(self) -> None:
        """Drop the queued jobs and let the thread end after the job it is running, without
        waiting for it: for leaving on an error or a second Ctrl-C. That job's file is then
        either finished or, if the process ends first, left as a hidden temporary (every file
        is written under a temporary name and renamed into place)."""
        with self._changed:
            self._closing = True
            self._jobs.clear()
            self._queued_bytes = 0
            self._changed.notify_all()

    @property
    def stopped(self) -> bool:
        """Whether the thread has ended (after `close`, or an abandon once its job is done)."""
        return not self._thread.is_alive()

    def _raise_error(self) -> None:
        """Raise the failed job's error in the calling thread (caller holds the lock)."""
        if self._error is not None:
            raise self._error

    def _work(self) -> None:
        """The thread: run jobs in order until closed; on an error, keep it and stop."""
        while True:
            with self._changed:
                while not self._jobs and not self._closing:
                    self._changed.wait()
                if not self._jobs:
                    return
                job, nbytes = self._jobs.popleft()
                self._running = True
            started = time.perf_counter()
            try:
                job()
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                with self._changed:
                    self._error = error
                    self._jobs.clear()
                    self._queued_bytes = 0
                    self._running = False
                    self._closing = True
                    self._changed.notify_all()
                return
            finally:
                self.busy_s += time.perf_counter() - started
            with self._changed:
                self._queued_bytes -= nbytes
                self._running = False
                self._changed.notify_all()
