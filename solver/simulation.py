"""The time loop and the `dambreak run` job: config -> scene -> device arrays -> steps, with
observers (snapshots, probes, progress) reading the state at chosen times.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time as wallclock
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import taichi as ti

from solver import __version__
from solver.backend import (
    BackendError,
    BackendInfo,
    check_capabilities,
    resolve_backend,
    start_backend,
)
from solver.config import Config, ConfigError, config_to_toml, load_config
from solver.integrate import REMOVED_DENSITY, REMOVED_OUTSIDE, build_integrator, time_step
from solver.neighbors import CellGrid
from solver.output.files import OutputExistsError, atomic_write_text, prepare_output_dir
from solver.output.npz import write_snapshot_npz
from solver.output.probes import ProbeSampler, ProbeWriter
from solver.output.progress import ProgressBar, format_duration
from solver.particle_kind import ParticleKind
from solver.particles import ParticleArrays
from solver.physics.eos import tait_density, tait_pressure
from solver.physics.interaction import build_interaction
from solver.scene import Scene, build_scene
from solver.snapshot import Snapshot


def initial_density(cfg: Config, scene: Scene) -> np.ndarray:
    """Hydrostatic density in the fluid below the still-water level, rho0 elsewhere.

    As DualSPHysics' GenCase and OpenFPM start their dam breaks: rho = rho0 (rho0 |g| depth / B
    + 1)^(1/gamma) for fluid. Boundary particles start at rho0: a wall density is not reset
    where no fluid touches it, so a hydrostatic value on a dry floor would push the water off it.
    """
    surface = cfg.tank.box.min[2] + cfg.water_height
    depth = np.maximum(surface - scene.position[:, 2], 0.0)
    depth[scene.kind != ParticleKind.FLUID] = 0.0
    pressure = cfg.physics.rho0 * cfg.gravity_magnitude * depth
    return tait_density(pressure, cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma)


def resolve_skin(cfg: Config) -> float:
    """neighbors.skin, or the running backend's default: 0 on the CPU, where the sort is
    cheap beside the interaction, 0.1 on GPUs, where the sort's many short launches cost
    more than the interaction itself."""
    if cfg.neighbors.skin is not None:
        return cfg.neighbors.skin
    return 0.0 if ti.lang.impl.current_cfg().arch.name in ("x64", "arm64") else 0.1


class Simulation:
    """The particle state of one case on the running Taichi backend, and its time step."""

    def __init__(self, cfg: Config, scene: Scene | None = None) -> None:
        self.cfg = cfg
        self.scene = scene if scene is not None else build_scene(cfg)
        capacity = len(self.scene.kind)
        self.symplectic = cfg.time.integrator == "symplectic"
        dtype = ti.f64 if cfg.physics.precision == "f64" else ti.f32
        self.particles = ParticleArrays(capacity, dtype, keep_position_prev=self.symplectic)
        density = initial_density(cfg, self.scene)
        pressure = tait_pressure(density, cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma)
        self.particles.load(self.scene.position, self.scene.kind, density, pressure)
        self.grid = CellGrid(cfg.domain.min, cfg.domain.max, cfg.support_radius, capacity)
        from solver.parallel.reduce import Reducer

        self._reducer = Reducer(capacity, dtype, components=3)
        self._dt_maxima = ti.Vector.ndarray(3, dtype, shape=1)
        self.skin = resolve_skin(cfg)
        self._interact = build_interaction(cfg, self.skin)
        self._verlet, self._predict, self._correct = build_integrator(cfg)
        self.moved = math.inf
        """Bound on how far any particle moved since the last sort (inf: sort now) [m]."""
        self.sorts = 0
        self.time = 0.0
        self.steps = 0
        self.dt = 0.0
        self.initial_fluid = self.scene.count(ParticleKind.FLUID)

    @property
    def count(self) -> int:
        """Particles alive (fluid and boundary)."""
        return self.particles.count

    @property
    def removed(self) -> int:
        """Fluid particles removed so far (left the domain or the density band)."""
        return sum(self.removed_by_reason().values())

    def removed_by_reason(self) -> dict[str, int]:
        """Particles dropped so far, by why (flags still pending count with their reason)."""
        dropped = self.grid.dropped.to_numpy()
        pending = np.bincount(self.particles.removed.to_numpy()[: self.count], minlength=3)
        return {
            "outside_domain": int(dropped[REMOVED_OUTSIDE] + pending[REMOVED_OUTSIDE]),
            "density_out_of_band": int(dropped[REMOVED_DENSITY] + pending[REMOVED_DENSITY]),
        }

    def _sort_if_needed(self) -> None:
        """Re-sort into cells (dropping flagged particles) once the skin may be used up.

        The interaction searches skin * 2H beyond the support around each particle's current
        position, over cells filled at the last sort, so it finds every neighbour as long as no
        particle has moved farther than that since (the Verlet-list argument of Verlet 1967,
        applied to cells as in Dominguez et al. 2011).
        """
        if self.moved <= self.skin * self.cfg.support_radius and not self.symplectic:
            return
        p = self.particles
        n = self.grid.update(p.position, p.id, p.removed, p.count)
        p.reorder(self.grid.order, n)
        p.removed.fill(0)
        self.moved = 0.0
        self.sorts += 1

    def _update_neighbours_and_forces(self) -> None:
        """Sort by cell when needed, then the interaction pass."""
        self._sort_if_needed()
        p = self.particles
        lo, inv_cell, dims, offsets = self.grid.kernel_args()
        self._interact(
            p.position,
            p.velocity,
            p.density,
            p.pressure,
            p.kind,
            p.removed,
            p.count,
            lo,
            inv_cell,
            dims,
            offsets,
            p.acceleration,
            p.density_rate,
            p.dt_terms,
        )

    def _maxima(self) -> tuple[float, float, float]:
        """max |a|, max |v| (fluid) and the viscous rate of this interaction (deterministic)."""
        p, n = self.particles, self.particles.count
        self._reducer.max(p.dt_terms, n, self._dt_maxima)
        a_max, v_max, visc_max = (float(v) for v in self._dt_maxima.to_numpy()[0])
        return a_max, v_max, visc_max

    def _symplectic_arrays(self) -> tuple:
        """The arrays of the predictor and corrector kernels, as they are now (a sort swaps
        each state array with its spare)."""
        p = self.particles
        return (p.position, p.velocity, p.density, p.position_prev, p.velocity_prev,
                p.density_prev, p.kind, p.acceleration, p.density_rate, p.pressure,
                p.removed)  # fmt: skip

    def step(self, dt_limit: float = math.inf) -> None:
        """Advance one time step: the CFL step, shortened to `dt_limit` when that is smaller
        (so a run lands exactly on its output times)."""
        p = self.particles
        self._update_neighbours_and_forces()
        a_max, v_max, visc_max = self._maxima()
        dt = min(time_step(self.cfg, a_max, v_max, visc_max), dt_limit)
        # Verlet moves a particle by dt v + dt^2 a / 2 at most.
        self.moved += dt * v_max + 0.5 * dt * dt * a_max
        if self.symplectic:
            self._predict(*self._symplectic_arrays(), p.count, dt)
            self._update_neighbours_and_forces()  # re-sorts: the arrays are swapped
            self._correct(*self._symplectic_arrays(), p.count, dt)
        else:
            every = self.cfg.time.verlet_euler_every
            euler = int(self.steps % every == every - 1)
            self._verlet(
                p.position,
                p.velocity,
                p.velocity_prev,
                p.density,
                p.density_prev,
                p.kind,
                p.acceleration,
                p.density_rate,
                p.pressure,
                p.removed,
                p.count,
                dt,
                euler,
            )
        self.dt = dt
        self.time += dt
        self.steps += 1

    def snapshot(self) -> Snapshot:
        """The live particles now, with pressure from the current density."""
        p = self.particles
        snap = p.snapshot(self.time, self.steps)
        keep = p.removed.to_numpy()[: p.count] == 0
        if keep.all():
            return snap
        return Snapshot(
            snap.time,
            snap.step,
            snap.position[keep],
            snap.velocity[keep],
            snap.density[keep],
            snap.pressure[keep],
            snap.kind[keep],
            snap.id[keep],
        )


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


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_simulation(
    cfg: Config,
    out_dir: Path,
    *,
    backend: str = "auto",
    threads: int | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> dict:
    """Run `cfg` on `backend`, writing snapshots, probes, config and summary into out_dir.

    Checks what can be checked (backend capabilities, the output folder) before anything is
    written. Returns the summary, also saved as summary.json.
    """
    out_dir = Path(out_dir)
    if backend != "auto":
        check_capabilities(backend, cfg.physics.precision, threads)
    prepare_output_dir(out_dir, force)
    info = start_backend(backend, cfg.physics.precision, threads)
    started = wallclock.perf_counter()
    sim = Simulation(cfg)
    counts = sim.scene.counts()
    _print(
        f"dambreak {__version__}: case {cfg.name} on {info.name} ({info.device}), {info.precision}"
    )
    _print(
        "particles: "
        + ", ".join(f"{v} {k.lower()}" for k, v in counts.items())
        + f", {len(sim.scene.kind)} in all"
    )
    atomic_write_text(out_dir / "config.toml", config_to_toml(cfg))

    observers = RunObservers(cfg, out_dir)
    observers.observe(sim.snapshot())
    progress = ProgressBar(cfg.time.end) if show_progress else None
    first_step_s = 0.0
    particle_steps = 0
    loop_started = wallclock.perf_counter()
    try:
        while sim.time < cfg.time.end * (1.0 - 1e-12):
            step_started = wallclock.perf_counter()
            sim.step(dt_limit=min(observers.next_time(), cfg.time.end) - sim.time)
            if sim.steps == 1:
                ti.sync()
                first_step_s = wallclock.perf_counter() - step_started
            else:
                particle_steps += sim.count
            if not math.isfinite(sim.dt) or sim.count == 0:
                raise FloatingPointError(f"simulation broke down at t = {sim.time:.6g} s")
            if observers.wants(sim.time) or sim.time >= cfg.time.end * (1.0 - 1e-12):
                observers.observe(sim.snapshot())
            if progress is not None:
                progress.update(sim.time, sim.steps, sim.dt, sim.count)
    finally:
        if progress is not None:
            progress.close()
        observers.close()
    ti.sync()
    loop_s = wallclock.perf_counter() - loop_started
    steady_s = max(loop_s - first_step_s, 1e-12)
    fluid_end = int(np.count_nonzero(sim.snapshot().kind == ParticleKind.FLUID))
    summary = {
        "case": cfg.name,
        "config": cfg.source,
        "dambreak_version": __version__,
        "backend": info.name,
        "device": info.device,
        "precision": info.precision,
        "threads": info.threads,
        "taichi_version": info.taichi_version,
        "python_version": platform.python_version(),
        "particles": {k.lower(): v for k, v in counts.items()} | {"total": len(sim.scene.kind)},
        "steps": sim.steps,
        "simulated_time": sim.time,
        "wall_time_s": wallclock.perf_counter() - started,
        "compile_time_s": first_step_s,
        "particle_steps_per_second": particle_steps / steady_s if sim.steps > 1 else 0.0,
        "mass_initial": sim.initial_fluid * cfg.particle_mass,
        "mass_final": fluid_end * cfg.particle_mass,
        "removed": sim.removed,
        "removed_by_reason": sim.removed_by_reason(),
        "neighbor_skin": sim.skin,
        "sorts": sim.sorts,
        "snapshots": observers.snapshots_written,
        "snapshot_formats": [f for f in ("vtk", "npz") if getattr(cfg.output, f)],
    }
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    _print(
        f"done: {sim.steps} steps to t = {sim.time:.4g} s "
        f"in {format_duration(summary['wall_time_s'])}"
        f" (compile {first_step_s:.1f} s), {summary['particle_steps_per_second']:.3g} "
        f"particle-steps/s, {sim.removed} removed; output in {out_dir}"
    )
    return summary


def run_command(args: argparse.Namespace) -> int:
    """`dambreak run`: exit 0 on success, 2 for bad input, 1 when the run fails."""
    try:
        cfg = load_config(args.config, args.overrides)
        out_dir = Path(args.out) if args.out else cfg.output_dir
        run_simulation(cfg, out_dir, backend=args.backend, threads=args.threads, force=args.force)
    except (ConfigError, BackendError, OutputExistsError, NotADirectoryError) as error:
        _print(f"dambreak run: error: {error}")
        return 2
    except KeyboardInterrupt:
        _print("dambreak run: interrupted; the output folder holds what was written so far")
        return 130
    except Exception as error:  # noqa: BLE001 - report any failure of the run itself
        traceback.print_exc()
        _print(f"dambreak run: failed: {error}")
        return 1
    return 0


__all__ = [
    "BackendInfo",
    "Schedule",
    "Simulation",
    "initial_density",
    "resolve_backend",
    "run_command",
    "run_simulation",
]
