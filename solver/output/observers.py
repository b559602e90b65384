"""Observers of a run: at scheduled times they write snapshots (VTK + .pvd and/or .npz) and
the probes (probes.csv) into the run folder; they never change the state.

A snapshot copies every particle to the host; the probes are evaluated on the device
(solver/output/device_probes.py), so a probe time that is not a snapshot time costs one small
kernel and read-back. Probes take the device path at snapshot times too, so that each series
comes from one computation all along.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.config import Config
from solver.output.device_probes import DeviceProbes
from solver.output.npz import write_snapshot_npz
from solver.output.probes import ProbeWriter
from solver.snapshot import Snapshot

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
        resume: dict[str, Any] | None = None,
    ) -> None:
        """Start the outputs in `out_dir`, or continue them from `resume`, a `state()`;
        `probes` are the case's probes on the simulation's device.

        Resuming removes the snapshots the stopped run wrote after its checkpoint (the resumed
        run writes them again) and rewrites the .pvd and probes.csv as they were then.
        """
        self.cfg = cfg
        self.out_dir = out_dir
        resume = resume or {}
        self.snapshots_written = int(resume.get("snapshots_written", 0))
        self._pvd = None
        if cfg.output.vtk:
            from solver.output.vtk import PvdWriter

            self._pvd = PvdWriter(out_dir / "particles.pvd", resume.get("pvd", ()))
        if resume:  # after the .pvd, so that it never lists a removed file
            self._remove_snapshots_from(self.snapshots_written)
        self._device_probes = probes
        self._probes = ProbeWriter(out_dir / "probes.csv", probes.names, resume.get("probes"))
        self.snapshot_schedule = Schedule(cfg.time.output_interval, resume.get("snapshot_index", 0))
        self.probe_schedule = Schedule(cfg.probe_interval, resume.get("probe_index", 0))

    def state(self) -> dict[str, Any]:
        """Where the outputs stand (JSON-ready): what `RunObservers(resume=...)` continues."""
        return {
            "snapshots_written": self.snapshots_written,
            "snapshot_index": self.snapshot_schedule.index,
            "probe_index": self.probe_schedule.index,
            "pvd": self._pvd.entries if self._pvd is not None else [],
            "probes": self._probes.text,
        }

    def _remove_snapshots_from(self, first: int) -> None:
        """Delete snapshot files numbered `first` and above."""
        for path in self.out_dir.glob("particles_*.*"):
            number = path.stem.removeprefix("particles_")
            if path.suffix in (".vtp", ".npz") and number.isdigit() and int(number) >= first:
                path.unlink()

    def wants(self, time: float) -> bool:
        """Whether any observer is due at `time`."""
        return self.snapshot_schedule.due(time) or self.probe_schedule.due(time)

    def next_time(self) -> float:
        """The next time an observer wants to look at."""
        return min(self.snapshot_schedule.next_time, self.probe_schedule.next_time)

    def observe(self, sim: "Simulation") -> bool:
        """Write what is due at the simulation's time; returns whether a snapshot was written
        (only then are the particles copied to the host)."""
        snapshot_due = self.snapshot_schedule.due(sim.time)
        if snapshot_due:
            self._write_snapshot(sim.snapshot())
        if self.probe_schedule.due(sim.time):
            if self._probes.names:
                self._probes.write(sim.time, self._device_probes.sample())
            self.probe_schedule.advance(sim.time)
        return snapshot_due

    def _write_snapshot(self, snap: Snapshot) -> None:
        """Write `snap` in the configured formats and list it in the .pvd."""
        stem = f"particles_{self.snapshots_written:05d}"
        if self._pvd is not None:
            from solver.output.vtk import write_snapshot

            write_snapshot(self.out_dir / f"{stem}.vtp", snap)
            self._pvd.add(snap.time, f"{stem}.vtp")
        if self.cfg.output.npz:
            write_snapshot_npz(self.out_dir / f"{stem}.npz", snap)
        self.snapshots_written += 1
        self.snapshot_schedule.advance(snap.time)

    def close(self) -> None:
        """Flush and close the probe file."""
        self._probes.close()
