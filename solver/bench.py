"""`dambreak bench`: the speed of a whole SPH step on one backend, in figures other codes publish.

After a warm-up, the scene runs S steps from rest, in batches launched without read-backs as
`dambreak run` takes them (solver/step_batch.py), and the wall time gives particle-steps per
second (every phase of a step: neighbour sort when due, interaction, time-step reduction,
integration). Neighbour interactions per second count the pairs closer than the support, once
per particle per step, as DualSPHysics' PIPS does (Dominguez et al. 2013, "New multi-GPU
implementation for smoothed particle hydrodynamics on heterogeneous clusters", CPC 184): that
figure compares codes whose kernels hold different numbers of neighbours. A second, shorter
pass times each phase with the device drained around it. Also reported: the compile time of
the first step, the time from process start to the first step, and device memory per particle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import taichi as ti

from solver.backend import (
    BACKEND_CHOICES,
    BackendError,
    check_capabilities,
    running_arch,
    start_backend,
)
from solver.config import Config, ConfigError, load_config
from solver.memory import available_bytes, estimate
from solver.neighbour_count import neighbours_per_particle
from solver.particle_kind import ParticleKind
from solver.phase_timer import PhaseTimer, untimed
from solver.scene import particle_count_bound
from solver.simulation import Simulation

SEED_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "dambreak.toml"
"""The case benchmarked when no file is given: the seed dam break (cases.md section 1)."""


@dataclass
class BenchResult:
    """What one benchmark measured; the keys of `--json`."""

    case: str
    backend: str
    device: str
    precision: str
    threads: int | None
    dp: float
    particles: int
    fluid_particles: int
    warmup_steps: int
    steps: int
    sorts: int
    simulated_time: float
    wall_s: float
    particle_steps_per_second: float
    neighbours_per_particle: float
    neighbour_interactions_per_second: float
    ms_per_step: float
    phase_ms_per_step: dict[str, float]
    phase_steps: int
    compile_s: float
    setup_s: float
    first_step_after_start_s: float | None
    device_bytes_per_particle: float
    device_bytes_used_per_particle: float | None


def seconds_since_process_start() -> float | None:
    """Wall seconds since this process started (Linux /proc), or None where unknown."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat(5), counted after the command name
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


def dp_for_particles(cfg: Config, target: int) -> float:
    """The particle spacing at which `cfg`'s scene holds about `target` particles.

    Bisection on dp over the exact lattice count (`particle_count_bound`), which needs no
    scene; the count falls as dp grows.
    """
    low, high = cfg.dp / 64.0, cfg.dp * 64.0
    for _ in range(60):
        middle = (low * high) ** 0.5
        count = particle_count_bound(_with_dp(cfg, middle))
        if count > target:
            low = middle
        else:
            high = middle
        if high / low < 1.0 + 1e-6:
            break
    return high


def _with_dp(cfg: Config, dp: float) -> Config:
    return replace(cfg, dp=dp)


class _StepProgress:
    """A line on stderr every few seconds while steps run, for long benchmarks."""

    def __init__(self, label: str, total: int, quiet: bool) -> None:
        self.label, self.total, self.quiet = label, total, quiet
        self.last = time.perf_counter()

    def update(self, done: int) -> None:
        now = time.perf_counter()
        if not self.quiet and now - self.last > 5.0:
            print(f"  {self.label}: step {done}/{self.total}", file=sys.stderr, flush=True)
            self.last = now


@dataclass
class TimedSteps:
    """What `time_steps` measured."""

    steps: int
    sorts: int
    simulated_time: float
    particle_steps: int
    wall_s: float


def time_steps(sim: Simulation, steps: int, progress: _StepProgress | None = None) -> TimedSteps:
    """Run and time the next `steps` steps of `sim`, in batches without read-backs, as
    `dambreak run` steps (no output time to land on): the wall time from a drained device to
    the last batch done on it, with the steps, sorts, simulated time and particle-steps
    (live particles times steps, batch by batch) it covered."""
    sorts_before, time_before, steps_before = sim.sorts, sim.time, sim.steps
    particle_steps = 0
    done = 0
    ti.sync()
    started = time.perf_counter()
    while done < steps:
        sim.advance(math.inf, steps - done)
        particle_steps += sim.count * (sim.steps - steps_before - done)
        done = sim.steps - steps_before
        if progress is not None:
            progress.update(done)
    ti.sync()
    wall_s = time.perf_counter() - started
    return TimedSteps(
        steps=done,
        sorts=sim.sorts - sorts_before,
        simulated_time=sim.time - time_before,
        particle_steps=particle_steps,
        wall_s=wall_s,
    )


def run_bench(
    cfg: Config,
    *,
    backend: str = "auto",
    threads: int | None = None,
    steps: int = 200,
    warmup: int = 20,
    phase_steps: int = 20,
    quiet: bool = False,
) -> BenchResult:
    """Benchmark `cfg` on `backend`: `warmup` steps, then `steps` timed steps, then
    `phase_steps` steps timed phase by phase."""
    if steps < 1 or warmup < 1 or phase_steps < 0:
        raise ValueError("steps and warmup must be at least 1, phase_steps at least 0")
    if backend != "auto":
        check_capabilities(backend, cfg.physics.precision, threads, cfg.source)
    info = start_backend(backend, cfg.physics.precision, threads, source=cfg.source)
    free_before = available_bytes(info.name) if info.name == "cuda" else None
    setup_started = time.perf_counter()
    sim = Simulation(cfg)
    ti.sync()
    setup_s = time.perf_counter() - setup_started
    n = sim.count
    if not quiet:
        print(
            f"bench: {cfg.name}, {n:,} particles on {info.name} ({info.device}), "
            f"{info.precision}; {warmup} warm-up, {steps} timed steps",
            file=sys.stderr,
        )

    started = time.perf_counter()
    sim.step()
    ti.sync()
    compile_s = time.perf_counter() - started
    first_step_after_start = seconds_since_process_start()
    progress = _StepProgress("warm-up", warmup, quiet)
    for k in range(1, warmup):
        sim.step()
        progress.update(k + 1)
    sim.compile_batch_sort()  # else the timed steps' first queued sort compiles it
    ti.sync()

    neighbours_before = neighbours_per_particle(sim)
    timed = time_steps(sim, steps, _StepProgress("timed", steps, quiet))
    wall_s = timed.wall_s
    neighbours = 0.5 * (neighbours_before + neighbours_per_particle(sim))

    if phase_steps:
        sim.phase = PhaseTimer()
        sim.step()  # compiles the separate kernels that phase timing runs
    timer = PhaseTimer()
    sim.phase = timer
    for _ in range(phase_steps):
        sim.step()
    sim.phase = untimed
    free_after = available_bytes(info.name) if free_before is not None else None

    fluid = int(np.count_nonzero(sim.scene.kind == ParticleKind.FLUID))
    memory = estimate(cfg)
    rate = timed.particle_steps / wall_s
    used = None
    if free_before is not None and free_after is not None:
        used = (free_before - free_after) / n
    return BenchResult(
        case=cfg.name,
        backend=info.name,
        device=info.device,
        precision=info.precision,
        threads=info.threads,
        dp=cfg.dp,
        particles=n,
        fluid_particles=fluid,
        warmup_steps=warmup,
        steps=steps,
        sorts=timed.sorts,
        simulated_time=timed.simulated_time,
        wall_s=wall_s,
        particle_steps_per_second=rate,
        neighbours_per_particle=neighbours,
        neighbour_interactions_per_second=rate * neighbours,
        ms_per_step=1e3 * wall_s / steps,
        phase_ms_per_step={k: 1e3 * v / max(phase_steps, 1) for k, v in timer.seconds.items()},
        phase_steps=phase_steps,
        compile_s=compile_s,
        setup_s=setup_s,
        first_step_after_start_s=first_step_after_start,
        device_bytes_per_particle=memory.device_bytes_on(running_arch()) / memory.particles,
        device_bytes_used_per_particle=used,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `dambreak bench`."""
    parser.add_argument("config", nargs="?", help="TOML config (default: configs/dambreak.toml)")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    parser.add_argument("--threads", type=int, help="CPU threads (cpu backend)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--dp", type=float, help="particle spacing [m] (default: the config's)")
    size.add_argument(
        "--particles", type=int, metavar="N", help="choose dp so the scene holds about N particles"
    )
    parser.add_argument("--steps", type=int, default=200, help="timed steps (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up steps (default 20)")
    parser.add_argument(
        "--phase-steps", type=int, default=20, help="steps timed phase by phase (default 20)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _report(result: BenchResult) -> str:
    """The human-readable summary of a benchmark."""
    r = result
    phases = ", ".join(f"{name} {ms:.3f}" for name, ms in r.phase_ms_per_step.items())
    used = (
        f"; the driver saw {r.device_bytes_used_per_particle:.0f} B/particle taken"
        if r.device_bytes_used_per_particle is not None
        else ""
    )
    started = (
        f"{r.first_step_after_start_s:.1f} s after process start"
        if r.first_step_after_start_s is not None
        else "time since process start unknown"
    )
    return "\n".join(
        [
            f"{r.case} on {r.backend} ({r.device}), {r.precision}: {r.particles:,} particles "
            f"({r.fluid_particles:,} fluid), dp {r.dp:.4g} m",
            f"  {r.steps} steps after {r.warmup_steps} warm-up ({r.sorts} neighbour sorts, "
            f"{r.simulated_time:.4g} s simulated) in {r.wall_s:.3f} s: {r.ms_per_step:.3f} ms/step",
            f"  {r.particle_steps_per_second:.3g} particle-steps/s; "
            f"{r.neighbour_interactions_per_second:.3g} neighbour interactions/s "
            f"({r.neighbours_per_particle:.1f} per particle)",
            f"  phases, ms/step over {r.phase_steps} synchronised steps: {phases}",
            f"  compile (first step) {r.compile_s:.2f} s, first step done {started}; "
            f"setup {r.setup_s:.2f} s",
            f"  device arrays {r.device_bytes_per_particle:.0f} B/particle{used}",
        ]
    )


def main(args: argparse.Namespace) -> int:
    """Run `dambreak bench`; 0 on success, 2 for bad input."""
    try:
        cfg = load_config(args.config or SEED_CONFIG, args.overrides)
        if args.particles is not None:
            if args.particles < 1:
                raise ConfigError(f"--particles must be at least 1, got {args.particles}")
            cfg = load_config(
                args.config or SEED_CONFIG,
                [*args.overrides, f"particles.dp={dp_for_particles(cfg, args.particles)!r}"],
            )
        elif args.dp is not None:
            cfg = load_config(
                args.config or SEED_CONFIG, [*args.overrides, f"particles.dp={args.dp!r}"]
            )
        # With --json, stdout carries the JSON object alone (Taichi prints its banner there).
        with contextlib.redirect_stdout(sys.stderr):
            result = run_bench(
                cfg,
                backend=args.backend,
                threads=args.threads,
                steps=args.steps,
                warmup=args.warmup,
                phase_steps=args.phase_steps,
                quiet=args.json,
            )
    except (ConfigError, BackendError, ValueError) as error:
        print(f"dambreak bench: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(_report(result))
    return 0
