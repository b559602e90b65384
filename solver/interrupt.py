"""Ctrl-C and SIGTERM during a run: the first asks the time loop to stop after the current batch
of steps (it then writes a checkpoint and exits 130), the second stops at once
(KeyboardInterrupt).

Stopping at once is safe for the files because every output is written under a temporary name
and renamed into place, and probes.csv rows go out in one write each. The background writer's
queued files are then dropped (solver/output/writer.py, `abandon`): the .pvd lists only the
snapshots written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterruptedError(Exception):
    """The run stopped on request after a step, with a checkpoint written (exit 130)."""


class StopRequest:
    """Set by the first SIGINT or SIGTERM while `installed`; `signal_name` names it."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signal_name is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        # os.write, not print: a handler may run in the middle of a print to stderr.
        os.write(
            2,
            f"\n{self.signal_name}: stopping after this step to write a checkpoint "
            "(Ctrl-C again stops at once)\n".encode(),
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopRequest]:
        """Handle SIGINT and SIGTERM while in the block, then restore the previous handlers.

        Signal handlers belong to the main thread; elsewhere nothing is installed.
        """
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
        for sig in SIGNALS:
            signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
