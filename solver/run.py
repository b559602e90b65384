"""`dambreak run`: config -> output folder -> backend -> simulation with its observers,
then summary.json and a short report on the terminal; checkpoints, resume, numerical failure
and interruption on the way."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import platform
import sys
import time as wallclock
import traceback
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import taichi as ti

from solver import __version__
from solver.backend import BackendError, check_capabilities, start_backend
from solver.config import Config, ConfigError, config_to_toml, load_config, loads_config
from solver.distributed.devices import share_devices
from solver.distributed.probes import DistributedProbes
from solver.distributed.simulation import DistributedSimulation
from solver.distributed.world import MpiUnavailableError, World, join_world
from solver.health import HealthCheck, HealthLimits, NumericalFailureError
from solver.interrupt import RunInterruptedError, StopRequest
from solver.memory import check_memory
from solver.neighbour_count import NeighbourCounter, NeighbourTally
from solver.output.checkpoint import Checkpoint, CheckpointError, read_checkpoint, write_checkpoint
from solver.output.device_probes import DeviceProbes
from solver.output.files import (
    OutputExistsError,
    OutputNotWritableError,
    atomic_write_text,
    check_writable,
    prepare_output_dir,
    remove_temporaries,
)
from solver.output.observers import RunObservers, Schedule
from solver.output.progress import ProgressBar, format_duration
from solver.output.writer import OutputWriter, handover, held_bytes
from solver.particle_kind import ParticleKind
from solver.removal_log import REMOVED_CSV, write_removed_csv
from solver.scene import build_scene, lattice_mismatches
from solver.simulation import Simulation
from solver.step_batch import MAX_STEPS


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _silent(message: str) -> None:
    """What the processes of an MPI job other than rank 0 print: nothing."""


def run_simulation(
    cfg: Config,
    out_dir: Path,
    *,
    backend: str = "auto",
    threads: int | None = None,
    force: bool = False,
    show_progress: bool = True,
    checkpoint_every: float | None = None,
    resume: Checkpoint | None = None,
    world: World | None = None,
) -> dict:
    """Run `cfg` on `backend`, writing snapshots, probes, config and summary into out_dir.

    Checks what can be checked (backend capabilities, the output folder) before anything is
    written. Every `checkpoint_every` simulated seconds the state goes to checkpoint.npz; with
    `resume` (read from out_dir) the run continues from that checkpoint. Returns the summary,
    also saved as summary.json.

    Files are written by a background writer (solver/output/writer.py) while the loop steps
    on; the loop copies what is to be written off the device and waits only when the writer's
    queue is full. Every checkpoint goes through the writer's queue too, or is written after
    draining it, so it is on disk only once every snapshot before it is. A write that fails
    is raised here at the loop's next call to the writer (an OSError: exit 1).

    Raises NumericalFailureError when the state goes bad (after keeping the last good state
    in checkpoint.npz) and RunInterruptedError after a SIGINT or SIGTERM (after a checkpoint
    of the state reached).

    With `world` (an MPI job of several processes, solver/distributed/) each process runs its
    slab; rank 0 alone prints and writes, and every decision that ends the loop is taken by
    all processes together.
    """
    out_dir = Path(out_dir)
    root = world is None or world.is_root
    say = _print if root else _silent
    if world is not None:
        threads = share_devices(world, backend, threads)

    def start() -> tuple:
        if backend != "auto":
            check_capabilities(backend, cfg.physics.precision, threads, source=cfg.source)
        info = start_backend(backend, cfg.physics.precision, threads, source=cfg.source)
        kept_on_device = check_memory(cfg, info)  # before the output folder is touched
        # So is a scene that cannot be built (e.g. all water carved away).
        return info, build_scene(cfg), kept_on_device

    started = wallclock.perf_counter()
    # A failure anywhere ends all.
    info, scene, kept_on_device = start() if world is None else world.agree(start)

    # Before the output folder: the decomposed simulation may refuse the case (exit 2).
    sim = Simulation(cfg, scene) if world is None else DistributedSimulation(cfg, world, scene)
    if not kept_on_device:
        sim.keep_on_host()
    probes = DeviceProbes(cfg, sim) if world is None else DistributedProbes(cfg, sim)

    def prepare() -> None:
        if resume is None:
            prepare_output_dir(out_dir, force)
            atomic_write_text(out_dir / "config.toml", config_to_toml(cfg))
        else:
            check_writable(out_dir)
            remove_temporaries(out_dir)

    if world is None:
        prepare()
    else:
        world.on_root(prepare)  # a refusal there ends every process
    counts = sim.scene.counts()
    ranks = f" x {world.size} processes" if world is not None else ""
    say(
        f"dambreak {__version__}: case {cfg.name} on {info.name} ({info.device}){ranks}, "
        f"{info.precision}"
    )
    say(
        "particles: "
        + ", ".join(f"{v} {k.lower()}" for k, v in counts.items())
        + f", {len(sim.scene.kind)} in all"
    )
    lattice_notes = lattice_mismatches(cfg)
    for note in lattice_notes:
        say(f"note: {note}")
    writer = OutputWriter()
    if resume is None:
        observers = RunObservers(cfg, out_dir, probes, writer, files=root)
    else:
        sim.restore(resume.state)
        observers = RunObservers(cfg, out_dir, probes, writer, resume.observers, files=root)
        say(f"resuming from the checkpoint at step {sim.steps}, t = {sim.time:.6g} s")

    def capture(state: dict[str, np.ndarray], outputs: dict) -> Checkpoint:
        """The checkpoint of `state`, a `sim.state()`, with `outputs`, the observers' state
        taken at the same moment."""
        return Checkpoint(
            state, outputs, config_to_toml(cfg), cfg.source, info.name, info.precision,
            __version__, checkpoint_every,
        )  # fmt: skip

    kept_outputs: dict = {}

    def keep_last_good() -> None:
        """Keep the state now as the last good one (on the device: `Simulation.keep`), and
        where the outputs stand with it; a numerical failure leaves them in checkpoint.npz."""
        nonlocal kept_outputs
        sim.keep()
        kept_outputs = observers.state()

    def submit_checkpoint(checkpoint: Checkpoint) -> None:
        """Queue `checkpoint` behind the snapshots taken before it (rank 0 writes it)."""
        if not root:
            return
        job = partial(write_checkpoint, out_dir, checkpoint)
        writer.submit(job, held_bytes(checkpoint.state.values()))

    checkpoints = Schedule(checkpoint_every, 1) if checkpoint_every else None
    if checkpoints is not None:
        checkpoints.advance(sim.time)
    health = HealthCheck(sim, HealthLimits(cfg.time.dt_min, cfg.physics.max_removed))
    stop = StopRequest()
    end = cfg.time.end * (1.0 - 1e-12)
    progress = ProgressBar(cfg.time.end) if show_progress and root else None

    def stopping() -> bool:
        """Whether a signal asks the run to stop (asked of every process together, so that
        all stop after the same step)."""
        return stop.requested if world is None else world.any(stop.requested)

    first_step_s = 0.0
    particle_steps = 0
    steps_here = 0
    # Neighbours counted at the output times (one kernel each), for the run's neighbour
    # interactions per second; not in a distributed run, whose ranks hold slabs.
    neighbours = NeighbourTally()
    count_neighbours = NeighbourCounter(sim) if world is None else None
    sim.while_batch_runs = observers.record_deferred
    loop_started = wallclock.perf_counter()
    with stop.installed(), handover():
        try:
            if resume is None:
                observers.start(sim)
            keep_last_good()
            if count_neighbours is not None:
                neighbours.add(count_neighbours(), sim.steps)
            while sim.time < end and not stopping():
                steps_before = sim.steps
                # A batch of steps up to the next output time, with no read-back between
                # them (probe times do not stop it); the first is one step alone. The loop's
                # start up to the end of that step (the first probe sample, keep and count,
                # the step, the batch's sort: each compiles its kernels) is compile_time_s,
                # which particle-steps/s leaves out.
                batch = MAX_STEPS if steps_here else 1
                sim.advance(min(observers.next_time(), cfg.time.end), batch)
                if steps_here == 0:
                    if world is None:  # the queued sort too (a distributed run has none)
                        sim.compile_batch_sort()
                    ti.sync()
                    first_step_s = wallclock.perf_counter() - loop_started
                else:
                    particle_steps += sim.count * (sim.steps - steps_before)
                steps_here += sim.steps - steps_before
                health.check()
                # The probe rows of this batch are copied now, before the next batch refills
                # them, and read into probes.csv while the next batch runs (or at the next
                # output time or the loop's end, whichever comes first).
                observers.record_deferred()  # where no batch ran them (see while_batch_runs)
                observers.defer_probes(probes.take_sums())
                # An output time keeps the state (see _keep_last_good); probe times copy only
                # the probes' sums.
                output_time = observers.observe(sim)
                if output_time:
                    keep_last_good()
                    if count_neighbours is not None:
                        neighbours.add(count_neighbours(), sim.steps)
                if checkpoints is not None and checkpoints.due(sim.time):
                    if not output_time:  # else kept just now
                        keep_last_good()
                    submit_checkpoint(capture(sim.kept_state(), kept_outputs))
                    checkpoints.advance(sim.time)
                if progress is not None:
                    progress.update(sim.time, sim.steps, sim.dt, sim.count)
            if sim.time < end:
                submit_checkpoint(capture(sim.state(), observers.state()))
                writer.close()
                raise RunInterruptedError(
                    f"{stop.signal_name or 'a signal to another process'}: "
                    f"stopped at step {sim.steps}, t = {sim.time:.6g} s; "
                    f"checkpoint written; resume with: dambreak run --resume {out_dir}"
                )
            observers.record_deferred()
            writer.close()  # every file on disk before the summary says the run is done
        except NumericalFailureError as failure:
            if not root:
                raise
            kept = _keep_last_good(out_dir, writer, capture(sim.kept_state(), kept_outputs))
            raise NumericalFailureError(f"{failure}\n{kept}") from None
        except KeyboardInterrupt:
            writer.abandon()  # stopped at once: what is queued is dropped
            raise
        except BaseException:
            # Keep what is queued, as the synchronous writes before would have; a write error
            # (perhaps the very error raised) must not hide the one that stopped the run.
            with contextlib.suppress(Exception):
                observers.record_deferred()
            with contextlib.suppress(Exception):
                writer.close()
            raise
        finally:
            if progress is not None:
                progress.close()
            if writer.stopped:  # after an abandon the thread may still append a probe row
                observers.close()
    ti.sync()
    loop_s = wallclock.perf_counter() - loop_started
    steady_s = max(loop_s - first_step_s, 1e-12)
    fluid_end = int(np.count_nonzero(sim.snapshot().kind == ParticleKind.FLUID))
    removed_by_reason = sim.removed_by_reason()
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
        "lattice_notes": lattice_notes,
        "steps": sim.steps,
        "simulated_time": sim.time,
        "wall_time_s": wallclock.perf_counter() - started,
        "compile_time_s": first_step_s,
        "particle_steps_per_second": particle_steps / steady_s if steps_here > 1 else 0.0,
        "neighbours_per_particle": neighbours.mean,
        "mass_initial": sim.initial_fluid * cfg.particle_mass,
        "mass_final": fluid_end * cfg.particle_mass,
        "removed": sum(removed_by_reason.values()),
        "removed_by_reason": removed_by_reason,
        "neighbor_skin": sim.skin,
        "neighbor_cell_sizes": [float(size) for size in sim.grid.cell_sizes],
        "sorts": sim.sorts,
        "snapshots": observers.snapshots_written,
        "snapshot_formats": [f for f in ("vtk", "npz") if getattr(cfg.output, f)],
        "output_wait_s": writer.waited_s,
        "output_write_s": writer.busy_s,
        "resumed_at_step": resume.steps if resume is not None else None,
        "ranks": world.size if world is not None else 1,
    }
    summary["neighbour_interactions_per_second"] = (
        summary["particle_steps_per_second"] * summary["neighbours_per_particle"]
        if summary["neighbours_per_particle"] is not None
        else None
    )
    if world is not None:
        summary["decomposition"] = sim.decomposition()
        exchange_s = float(world.max(np.array([sim.exchange_s]))[0])
        summary["exchange_s"] = exchange_s
        summary["exchange_share"] = exchange_s / max(loop_s, 1e-12)
    if not root:
        return summary
    if world is None:  # a distributed run keeps no removal log (docs/scaling.md)
        sim.log_removals()
        if len(sim.removal_log):
            write_removed_csv(out_dir / REMOVED_CSV, sim.removal_log.rows())
            summary["removed_file"] = REMOVED_CSV
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    _print(
        f"done: {sim.steps} steps to t = {sim.time:.4g} s "
        f"in {format_duration(summary['wall_time_s'])}"
        f" (compile {first_step_s:.1f} s), {summary['particle_steps_per_second']:.3g} "
        f"particle-steps/s{_interactions(summary)}, {summary['removed']} removed, "
        f"{writer.waited_s:.1f} s waiting on "
        f"output; "
        f"output in {out_dir}"
    )
    return summary


def _interactions(summary: dict) -> str:
    """' (N neighbour interactions/s)' for the summary line, or '' where not counted."""
    rate = summary["neighbour_interactions_per_second"]
    return f" ({rate:.3g} neighbour interactions/s)" if rate else ""


def _keep_last_good(out_dir: Path, writer: OutputWriter, last_good: Checkpoint) -> str:
    """Write the last good state as the checkpoint, once the writer has written every
    snapshot queued before it; say where the run's good results are.

    The last good state is the one of the latest output time or periodic checkpoint,
    whichever is later, kept on the device where it fits (`Simulation.keep`, a device-to-device
    copy) and copied to the host only now: keeping a copy before every step would cost a copy per
    step, and a host copy at every output time cost the GPUs more than the output itself
    (docs/performance.md).
    """
    where = f"step {last_good.steps}, t = {last_good.time:.6g} s"
    try:
        writer.close()
        write_checkpoint(out_dir, last_good)
    except OSError as error:
        return f"could not write the checkpoint of the last good state ({where}): {error}"
    snapshots = last_good.observers["snapshots_written"]
    return (
        f"kept: {snapshots} snapshot(s) and a checkpoint of the last good state ({where}) "
        f"in {out_dir}"
    )


def _resume_plan(args: argparse.Namespace) -> tuple[Config, Path, str, Checkpoint]:
    """For `--resume DIR`: the config, folder, backend and checkpoint to continue with.

    A CONFIG (or --set) given with --resume must resolve to the checkpoint's config, else the
    continuation would not be the run that was stopped; without one the checkpoint's config
    is taken. The backend defaults to the checkpoint's; another one is allowed with a warning.
    """
    out_dir = Path(args.resume)
    if args.out and Path(args.out).resolve() != out_dir.resolve():
        raise CheckpointError(f"--out {args.out} and --resume {out_dir} name different folders")
    if (out_dir / "summary.json").exists():
        raise CheckpointError(
            f"the run in {out_dir} has finished (summary.json); nothing to resume "
            "(--force starts it again)"
        )
    checkpoint = read_checkpoint(out_dir)
    saved = loads_config(checkpoint.config, source=checkpoint.config_source)
    if args.config is not None or args.overrides:
        given = load_config(args.config, args.overrides)
        if replace(given, source=saved.source) != saved:
            changed = [
                line
                for line in difflib.unified_diff(
                    config_to_toml(saved).splitlines()[1:],
                    config_to_toml(given).splitlines()[1:],
                    lineterm="",
                    n=0,
                )
                if line[:1] in "+-" and line[:3] not in ("+++", "---")
            ]
            raise CheckpointError(
                f"the config differs from the one the checkpoint in {out_dir} was run with "
                f"({'; '.join(changed)}); resume without CONFIG and --set to use that one"
            )
    backend = checkpoint.backend if args.backend == "auto" else args.backend
    if backend != checkpoint.backend:
        _print(
            f"warning: the checkpoint was written on {checkpoint.backend}; continuing on "
            f"{backend}, the result is not bitwise identical to an uninterrupted run"
        )
    return saved, out_dir, backend, checkpoint


def run_command(args: argparse.Namespace) -> int:
    """`dambreak run`: exit 0 on success, 2 for bad input (config, backend, output folder,
    checkpoint), 1 when the run fails (a write failing included), 3 on a numerical failure,
    130 when stopped by Ctrl-C or SIGTERM.

    Under `mpiexec -n K` the K processes end together with the same status: bad input, a
    numerical failure and a signal are seen by every process at the same point (the checks
    that rank 0 alone makes are handed to all, solver/distributed/world.py), and a failure
    of one process alone (a write error, a crash) aborts the whole job with its status."""
    try:
        world = join_world()
    except MpiUnavailableError as error:
        _print(f"dambreak run: error: {error}")
        return 2
    code, together = _run(args, world)
    if world is not None and code != 0 and not together:
        sys.stderr.flush()
        world.abort(code)
    return code


def _run(args: argparse.Namespace, world: World | None) -> tuple[int, bool]:
    """`run_command` for one process: its exit status, and whether every process of the
    job reaches the same status at the same point (else the job must be aborted)."""
    say = _print if world is None or world.is_root else _silent
    try:
        if args.resume:
            cfg, out_dir, backend, resume = _resume_plan(args)
        else:
            cfg = load_config(args.config, args.overrides)
            out_dir = Path(args.out) if args.out else cfg.output_dir
            backend, resume = args.backend, None
        checkpoint_every = args.checkpoint_every
        if checkpoint_every is None and resume is not None:
            checkpoint_every = resume.checkpoint_every
        run_simulation(
            cfg,
            out_dir,
            backend=backend,
            threads=args.threads,
            force=args.force,
            checkpoint_every=checkpoint_every,
            resume=resume,
            world=world,
        )
    except (
        ConfigError,
        BackendError,
        CheckpointError,
        OutputExistsError,
        OutputNotWritableError,
        NotADirectoryError,
    ) as error:
        say(f"dambreak run: error: {error}")
        return 2, True
    except NumericalFailureError as error:
        say(f"dambreak run: numerical failure: {error}")
        return 3, True
    except RunInterruptedError as error:
        say(f"dambreak run: {error}")
        return 130, True
    except KeyboardInterrupt:
        _print(
            "dambreak run: stopped at once; every file in the output folder is complete, "
            "the last checkpoint (if any) still resumes the run"
        )
        return 130, False
    except OSError as error:
        _print(
            f"dambreak run: error: could not write the output: {error}; what was written "
            "before is intact (a checkpoint, if any, still resumes the run)"
        )
        return 1, False
    except Exception as error:  # noqa: BLE001 - report any failure of the run itself
        traceback.print_exc()
        _print(f"dambreak run: failed: {error}")
        return 1, False
    return 0, True
