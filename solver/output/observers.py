"""Observers of a run: they read snapshots at scheduled times and write them (VTK + .pvd
and/or .npz) and the probes (probes.csv) into the run folder; they never change the state."""

from dataclasses import dataclass
from pathlib import Path

from solver.config import Config
from solver.output.npz import write_snapshot_npz
from solver.output.probes import ProbeSampler, ProbeWriter
from solver.snapshot import Snapshot


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

    def __init__(self, cfg: Config, out_dir: Path) -> None:
        self.cfg = cfg
        self.out_dir = out_dir
        self.snapshots_written = 0
        self._pvd = None
        if cfg.output.vtk:
            from solver.output.vtk import PvdWriter

            self._pvd = PvdWriter(out_dir / "particles.pvd")
        self._sampler = ProbeSampler(
            cfg.probes,
            smoothing_length=cfg.smoothing_length,
            kernel=cfg.physics.kernel,
            particle_mass=cfg.particle_mass,
            rho0=cfg.physics.rho0,
            z_range=(cfg.tank.box.min[2], cfg.tank.box.max[2]),
            dp=cfg.dp,
        )
        self._probes = ProbeWriter(out_dir / "probes.csv", self._sampler.names)
        self.snapshot_schedule = Schedule(cfg.time.output_interval)
        self.probe_schedule = Schedule(cfg.probe_interval)

    def wants(self, time: float) -> bool:
        """Whether any observer is due at `time`."""
        return self.snapshot_schedule.due(time) or self.probe_schedule.due(time)

    def next_time(self) -> float:
        """The next time an observer wants to look at."""
        return min(self.snapshot_schedule.next_time, self.probe_schedule.next_time)

    def observe(self, snap: Snapshot) -> None:
        """Write what is due at the snapshot's time."""
        if self.snapshot_schedule.due(snap.time):
            stem = f"particles_{self.snapshots_written:05d}"
            if self._pvd is not None:
                from solver.output.vtk import write_snapshot

                write_snapshot(self.out_dir / f"{stem}.vtp", snap)
                self._pvd.add(snap.time, f"{stem}.vtp")
            if self.cfg.output.npz:
                write_snapshot_npz(self.out_dir / f"{stem}.npz", snap)
            self.snapshots_written += 1
            self.snapshot_schedule.advance(snap.time)
        if self.probe_schedule.due(snap.time):
            if self._sampler.names:
                self._probes.write(snap.time, self._sampler.sample(snap))
            self.probe_schedule.advance(snap.time)

    def close(self) -> None:
        """Flush and close the probe file."""
        self._probes.close()
