"""Observers of a run: at scheduled times they write snapshots (VTK + .pvd and/or .npz) and
the probes (probes.csv) into the run folder; they never change the state.

A snapshot copies the arrays it is cut from to the host (`Simulation.snapshot_state()`) at the
output times, on which the run lands; the run keeps the state of each output time, on the
device where it fits, as its last good one (`Simulation.keep`).
The probes are sampled on the device by the steps that pass their times (the first step at or
after each; solver/step_batch.py), and the observers record the samples the run hands them
(`DeviceProbes.take_sums`, read while the next batch runs: `defer_probes`).

The files are written by the run's background writer (solver/output/writer.py): the observers
copy and record on the time loop's thread, and hand the writing over. What they record (the
snapshots numbered, the .pvd's entries, probes.csv's text) is what `state()` reports, so a
checkpoint taken at any moment describes the files as they are once the writer has caught up.
"""

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from solver.config import Config
from solver.output.device_probes import DeviceProbes
from solver.output.npz import write_snapshot_npz
from solver.output.probes import ProbeWriter
from solver.output.writer import OutputWriter, held_bytes
from solver.snapshot import STATE_KEYS, snapshot_from_state

if TYPE_CHECKING:
    from solver.simulation import Simulation


@dataclass
class Schedule:
    """Times k * interval (k = 0, 1, ...) at which an observer looks."""

    interval: float
    index: int = 0

    @property
    def next_time(self) -> float:
        """The next scheduled time."""
        return self.index * self.interval

    def due(self, time: float) -> bool:
        """Whether the next scheduled time has been reached (within a relative 1e-9)."""
        return time >= self.index * self.interval * (1.0 - 1e-9)

    def advance(self, time: float) -> None:
        """Move past every scheduled time up to `time`."""
        while self.due(time):
            self.index += 1


class RunObservers:
    """Snapshots (VTK + .pvd, and/or .npz) and probes written into a run folder."""

    def __init__(
        self,
        cfg: Config,
        out_dir: Path,
        probes: DeviceProbes,
        writer: OutputWriter,
        resume: dict[str, Any] | None = None,
        files: bool = True,
    ) -> None:
        """Start the outputs in `out_dir`, or continue them from `resume`, a `state()`;
        `probes` are the case's probes on the simulation's device, `writer` writes the files.

        Resuming removes the snapshots the stopped run wrote after its checkpoint (the resumed
        run writes them again) and rewrites the .pvd and probes.csv as they were then.

        Without `files` (the processes of an MPI job other than rank 0) the observers look at
        the same times and take part in the same collective copies, and write nothing.
        """
        self.cfg = cfg
        self.out_dir = out_dir
        self._writer = writer
        self._files = files
        resume = resume or {}
        self.snapshots_written = int(resume.get("snapshots_written", 0))
        """Snapshots numbered so far (handed to the writer; on disk once it has drained)."""
        self._pvd = None
        if cfg.output.vtk and files:
            from solver.output.vtk import PvdWriter

            self._pvd = PvdWriter(out_dir / "particles.pvd", resume.get("pvd", ()))
        if resume and files:  # after the .pvd, so that it never lists a removed file
            self._remove_snapshots_from(self.snapshots_written)
        self._device_probes = probes
        self._probes = (
            ProbeWriter(out_dir / "probes.csv", probes.names, resume.get("probes"))
            if files
            else None
        )
        self.snapshot_schedule = Schedule(cfg.time.output_interval, resume.get("snapshot_index", 0))
        self._deferred: list[tuple[float, np.ndarray]] = []
        """Probe sums taken from the device and not yet turned into readings (`defer_probes`)."""

    def state(self) -> dict[str, Any]:
        """Where the outputs stand (JSON-ready): what `RunObservers(resume=...)` continues,
        the deferred probe samples recorded first."""
        self.record_deferred()
        return {
            "snapshots_written": self.snapshots_written,
            "snapshot_index": self.snapshot_schedule.index,
            "pvd": self._pvd.entries if self._pvd is not None else [],
            "probes": self._probes.text if self._probes is not None else "",
        }

    def _remove_snapshots_from(self, first: int) -> None:
        """Delete snapshot files numbered `first` and above."""
        for path in self.out_dir.glob("particles_*.*"):
            number = path.stem.removeprefix("particles_")
            if path.suffix in (".vtp", ".npz") and number.isdigit() and int(number) >= first:
                path.unlink()

    def next_time(self) -> float:
        """The next output time, on which the run lands."""
        return self.snapshot_schedule.next_time

    def start(self, sim: "Simulation") -> bool:
        """The outputs at the start of a run: the probes sampled now and the first snapshot
        (see `observe`)."""
        if self._device_probes.names:
            self.record_probes([(sim.time, self._device_probes.sample())])
        return self.observe(sim)

    def record_probes(self, samples: list[tuple[float, dict[str, float]]]) -> None:
        """Hand the probe samples (time, values) to probes.csv, in order."""
        if self._probes is None:
            return
        for time, values in samples:
            row = self._probes.record(time, values)
            self._writer.submit(partial(self._probes.append, row))

    def defer_probes(self, samples: list[tuple[float, np.ndarray]]) -> None:
        """Hold the probe sums of a batch (`DeviceProbes.take_sums`) until `record_deferred`,
        which the time loop runs while the next batch is on the device (the simulation's
        `while_batch_runs`): turning sums into readings is host work the device need not
        wait for."""
        self._deferred.extend(samples)

    def record_deferred(self) -> None:
        """Record the deferred probe samples (`defer_probes`), in order."""
        if self._deferred:
            readings = self._device_probes.readings
            self.record_probes([(time, readings(sums)) for time, sums in self._deferred])
            self._deferred.clear()

    def observe(self, sim: "Simulation") -> bool:
        """Hand over to the writer the snapshot due at the simulation's time, if one is;
        whether one was (an output time: the caller keeps the state as the last good one).

        A snapshot copies off the device only the arrays its files hold
        (`sim.snapshot_state()`); with no snapshot format configured nothing is copied, and
        the snapshot is only counted.
        """
        if not self.snapshot_schedule.due(sim.time):
            return False
        if self.cfg.output.vtk or self.cfg.output.npz:
            self._submit_snapshot(sim.snapshot_state())
        else:
            self._count_snapshot(sim.time)
        return True

    def _submit_snapshot(self, state: dict[str, np.ndarray]) -> None:
        """Number the snapshot of `state`, list it in the .pvd, and queue its files."""
        time = float(state["time"])
        if self._files:
            stem = f"particles_{self.snapshots_written:05d}"
            listed = self._pvd.record(time, f"{stem}.vtp") if self._pvd is not None else ()
            needed = {key: state[key] for key in STATE_KEYS}  # nothing else is held queued
            job = partial(self._write_snapshot, stem, needed, listed)
            self._writer.submit(job, held_bytes(needed.values()))
        self._count_snapshot(time)

    def _count_snapshot(self, time: float) -> None:
        """Count the snapshot of `time` and move the schedule past it."""
        self.snapshots_written += 1
        self.snapshot_schedule.advance(time)

    def _write_snapshot(
        self, stem: str, state: dict[str, np.ndarray], listed: tuple[tuple[float, str], ...]
    ) -> None:
        """Cut the snapshot from `state` and write it in the configured formats, then the .pvd
        `listed` (with it last); on the writer's thread, so that the time loop only copies (a
        cut gathers the live particles when some are flagged for removal), and the .pvd names
        only complete files."""
        snap = snapshot_from_state(state)
        if self._pvd is not None:
            from solver.output.vtk import write_pvd, write_snapshot

            write_snapshot(self.out_dir / f"{stem}.vtp", snap, self.cfg.output.vtk_compression)
            write_pvd(self._pvd.path, listed)
        if self.cfg.output.npz:
            write_snapshot_npz(self.out_dir / f"{stem}.npz", snap, self.cfg.output.npz_compression)

    def close(self) -> None:
        """Close the probe file; only once the writer has stopped (it appends the rows)."""
        if self._probes is not None:
            self._probes.close()
