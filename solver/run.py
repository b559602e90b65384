"""`dambreak run`: config -> output folder -> backend -> simulation with its observers,
then summary.json and a short report on the terminal."""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time as wallclock
import traceback
from pathlib import Path

import numpy as np
import taichi as ti

from solver import __version__
from solver.backend import BackendError, check_capabilities, start_backend
from solver.config import Config, ConfigError, config_to_toml, load_config
from solver.memory import check_memory
from solver.output.files import OutputExistsError, atomic_write_text, prepare_output_dir
from solver.output.observers import RunObservers
from solver.output.progress import ProgressBar, format_duration
from solver.particle_kind import ParticleKind
from solver.simulation import Simulation


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
        check_capabilities(backend, cfg.physics.precision, threads, source=cfg.source)
    prepare_output_dir(out_dir, force)
    info = start_backend(backend, cfg.physics.precision, threads, source=cfg.source)
    check_memory(cfg, info)
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
