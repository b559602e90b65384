"""Issue 12: output off the critical path. The background writer writes exactly the files the
synchronous code wrote (same bytes, same order), blocks the time loop only when its queue is
full, hands a failed write back to the loop (exit 1, earlier files intact), never hangs a
leaving process, and every checkpoint reaches the disk after the snapshots taken before it.

`run_command` starts Taichi itself; `forget_backend` tells conftest so.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import conftest
import numpy as np
import pytest

import solver.output.observers as observers_module
import solver.output.vtk as vtk_module
import solver.run as run_module
from solver.cli import build_parser
from solver.config import load_config
from solver.interrupt import StopRequest
from solver.output.checkpoint import read_checkpoint
from solver.output.npz import NPZ_COMPRESSIONS, read_snapshot_npz, write_snapshot_npz
from solver.output.observers import RunObservers
from solver.output.probes import read_probes
from solver.output.vtk import read_pvd, read_snapshot, write_snapshot
from solver.output.writer import SWITCH_INTERVAL_S, OutputWriter, handover
from solver.particle_kind import ParticleKind
from solver.run import run_command
from solver.simulation import Simulation
from solver.snapshot import snapshot_from_state

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quick.toml"
FIELDS = ("position", "velocity", "density", "pressure", "kind", "id")


def dambreak_run(*argv: str) -> int:
    """`dambreak run ARGV...` in this process, through the real argument parser."""
    args = build_parser().parse_args(["run", *argv])
    try:
        return run_command(args)
    finally:
        conftest._current = None


ONE_STEP_BATCHES = "--set=neighbors.skin=0"
"""No skin: a sort after every step, so each batch of steps is one step long."""


def quick_args(out: Path, *extra: str) -> list[str]:
    """A short quick-case run on the CPU into `out`: 0.1 s, a snapshot every 0.01 s."""
    return [
        str(QUICK),
        "--backend=cpu",
        f"--out={out}",
        "--set=time.end=0.1",
        "--set=time.output_interval=0.01",
        *extra,
    ]


class FakeSimulation:
    """What the observers read of a simulation: its time and `snapshot_state()`, made up of
    random particles (500 slots, 480 live, two of them flagged for removal); `copies` holds
    every one handed out."""

    def __init__(self) -> None:
        self.time = 0.0
        self.steps = 0
        self._rng = np.random.default_rng(7)
        self.copies: list[dict[str, np.ndarray]] = []

    def snapshot_state(self) -> dict[str, np.ndarray]:
        self.copies.append(self._random_state())
        return self.copies[-1]

    def _random_state(self) -> dict[str, np.ndarray]:
        rng, capacity = self._rng, 500
        removed = np.zeros(capacity, np.int32)
        removed[[3, 40]] = 1
        return {
            "particles.position": rng.random((capacity, 3), dtype=np.float32),
            "particles.velocity": rng.normal(size=(capacity, 3)).astype(np.float32),
            "particles.density": (1000.0 + rng.normal(size=capacity)).astype(np.float32),
            "particles.pressure": rng.normal(size=capacity).astype(np.float32),
            "particles.kind": rng.integers(0, 3, capacity).astype(np.int32),
            "particles.id": rng.permutation(capacity).astype(np.int32),
            "particles.removed": removed,
            "count": np.int64(480),
            "steps": np.int64(self.steps),
            "time": np.float64(self.time),
        }


class FakeProbes:
    """One probe whose reading is twice the time."""

    names = ["twice_t"]

    def __init__(self, sim: FakeSimulation) -> None:
        self._sim = sim

    def sample(self) -> dict[str, float]:
        return {"twice_t": 2.0 * self._sim.time}

    def readings(self, sums: np.ndarray) -> dict[str, float]:
        return {"twice_t": 2.0 * float(sums[0])}


def test_background_writer_writes_the_synchronous_files_in_order(tmp_path: Path) -> None:
    """Snapshots handed to the background writer come out as the same bytes (.vtp with each
    compressor, .npz with each) as direct calls of the writers on the same snapshots; the .pvd
    lists them in order with their times, probes.csv holds every row in time order, and the
    observers' state equals what is on disk once the writer has drained."""
    pytest.importorskip("vtkmodules")
    pairs = zip(("lz4", "zlib", "none"), NPZ_COMPRESSIONS * 2, strict=False)
    for vtk_compression, npz_compression in pairs:
        overrides = [
            "output.npz=true",
            f"output.vtk_compression={vtk_compression}",
            f"output.npz_compression={npz_compression}",
            "time.output_interval=0.01",
            "output.probe_interval=0.005",
        ]
        cfg = load_config(QUICK, overrides)
        out, direct = tmp_path / vtk_compression / "run", tmp_path / vtk_compression / "direct"
        out.mkdir(parents=True)
        direct.mkdir()
        sim = FakeSimulation()
        writer = OutputWriter(max_bytes=1)  # one job queued at a time: the loop waits often
        probes = FakeProbes(sim)
        observers = RunObservers(cfg, out, probes, writer)
        output_times = [observers.start(sim)]
        for step in range(1, 13):
            sim.time, sim.steps = 0.0025 * step, step
            if step % 2 == 0:  # a step that passes a probe time
                observers.record_probes([(sim.time, probes.sample())])
            output_times.append(observers.observe(sim))
        states = sim.copies
        assert output_times == [step % 4 == 0 for step in range(13)]
        writer.close()
        observers.close()
        assert len(states) == 4 and observers.snapshots_written == 4
        for number, state in enumerate(states):
            snap = snapshot_from_state(state)
            assert snap.count == 478
            name = f"particles_{number:05d}"
            write_snapshot(direct / f"{name}.vtp", snap, vtk_compression)
            write_snapshot_npz(direct / f"{name}.npz", snap, npz_compression)
            for suffix in (".vtp", ".npz"):
                written = (out / f"{name}{suffix}").read_bytes()
                assert written == (direct / f"{name}{suffix}").read_bytes(), name + suffix
        listed = read_pvd(out / "particles.pvd")
        assert [t for t, _ in listed] == [float(s["time"]) for s in states]
        assert [p.name for _, p in listed] == [f"particles_{k:05d}.vtp" for k in range(4)]
        times, series = read_probes(out / "probes.csv")
        np.testing.assert_allclose(times, 0.005 * np.arange(7), rtol=1e-12)
        np.testing.assert_allclose(series["twice_t"], 2.0 * times, rtol=0.0)
        assert (out / "probes.csv").read_text() == observers.state()["probes"]
        assert observers.state()["pvd"] == [(t, p.name) for t, p in listed]


def test_deferred_probe_samples_are_recorded_in_order_before_any_state(tmp_path: Path) -> None:
    """The time loop defers a batch's probe readings until the next batch runs
    (`RunObservers.defer_probes`, `record_deferred`): the rows come out in time order, the
    observers' state records the deferred ones first (so a kept state or a checkpoint never
    misses a sample), and probes.csv is byte for byte the file of samples recorded at once."""
    cfg = load_config(QUICK, ["output.vtk=false", "output.probe_interval=0.005"])
    files = {}
    for deferred in (False, True):
        out = tmp_path / f"deferred_{deferred}"
        out.mkdir()
        sim = FakeSimulation()
        writer = OutputWriter()
        probes = FakeProbes(sim)
        observers = RunObservers(cfg, out, probes, writer)
        observers.start(sim)
        for step in range(1, 13):
            sim.time = 0.0025 * step
            if step % 2:
                continue
            if not deferred:
                observers.record_probes([(sim.time, probes.sample())])
                continue
            observers.defer_probes([(sim.time, np.array([sim.time]))])
            if step == 6:  # the state at a kept time holds every sample taken so far
                assert observers.state()["probes"].count("\n") == 1 + 1 + 3
            elif step % 4 == 0:
                observers.record_deferred()
        observers.record_deferred()
        writer.close()
        observers.close()
        files[deferred] = (out / "probes.csv").read_text()
    assert files[True] == files[False]
    times, series = read_probes(tmp_path / "deferred_True" / "probes.csv")
    np.testing.assert_allclose(times, 0.005 * np.arange(7), rtol=1e-12)
    np.testing.assert_allclose(series["twice_t"], 2.0 * times, rtol=0.0)


def test_npz_snapshots_are_the_same_bytes_every_time(tmp_path: Path) -> None:
    """An .npz archive does not depend on when it is written (its members carry a fixed
    date), and reads back bit for bit with either compression; deflate makes it smaller."""
    sim = FakeSimulation()
    snap = snapshot_from_state(sim.snapshot_state())
    sizes = {}
    for compression in NPZ_COMPRESSIONS:
        first, second = tmp_path / f"a-{compression}.npz", tmp_path / f"b-{compression}.npz"
        write_snapshot_npz(first, snap, compression)
        time.sleep(2.1)  # zip dates have a resolution of 2 s
        write_snapshot_npz(second, snap, compression)
        assert first.read_bytes() == second.read_bytes()
        back = read_snapshot_npz(first)
        assert (back.time, back.step) == (snap.time, snap.step)
        for name in FIELDS:
            assert getattr(back, name).tobytes() == getattr(snap, name).tobytes(), name
        sizes[compression] = first.stat().st_size
    assert sizes["deflate"] < sizes["none"]


def test_writer_runs_jobs_in_order_and_blocks_only_when_full() -> None:
    """Jobs run in the order submitted; with room for the jobs' bytes the caller goes on
    while the thread works and waits once the queue is full; drain waits for the last job.
    A running job holds its bytes until it ends: 3 bytes are one running and two queued."""
    done: list[int] = []
    release = threading.Event()
    writer = OutputWriter(max_bytes=3)

    def job(k: int) -> None:
        if k == 0:
            release.wait(5.0)
        done.append(k)

    writer.submit(lambda: job(0), 1)  # runs, and blocks until released
    time.sleep(0.05)
    writer.submit(lambda: job(1), 1)
    writer.submit(lambda: job(2), 1)  # 1 running + 2 queued = 3 bytes: no wait
    assert writer.waited_s < 0.05 and done == []
    threading.Timer(0.2, release.set).start()
    writer.submit(lambda: job(3), 1)  # full: waits until job 0 has let go of its byte
    assert writer.waited_s >= 0.1
    writer.drain()
    assert done == [0, 1, 2, 3]
    writer.close()
    assert writer.stopped and writer.busy_s >= 0.2


def test_a_failed_job_is_raised_in_the_caller_and_later_jobs_are_dropped() -> None:
    """A job's error comes back at the caller's next submit (and drain and close, which do not
    hang); the jobs queued after it are not run, those before it were."""
    done: list[int] = []
    writer = OutputWriter()
    writer.submit(lambda: done.append(1))

    def fail() -> None:
        time.sleep(0.05)
        raise OSError(28, "No space left on device", "particles_00001.vtp")

    writer.submit(fail)
    writer.submit(lambda: done.append(3))
    with pytest.raises(OSError, match="No space left"):
        writer.drain()
    with pytest.raises(OSError, match="No space left"):
        writer.submit(lambda: done.append(4))
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert done == [1] and writer.stopped


def test_abandon_returns_at_once_while_a_job_runs() -> None:
    """A second Ctrl-C abandons the writer: the call returns at once although a job is still
    running, and what was queued behind it never runs."""
    done: list[int] = []
    release = threading.Event()
    writer = OutputWriter()
    writer.submit(lambda: (release.wait(5.0), done.append(1)))
    writer.submit(lambda: done.append(2))
    time.sleep(0.05)
    started = time.perf_counter()
    writer.abandon()
    assert time.perf_counter() - started < 0.05 and not writer.stopped
    release.set()
    deadline = time.monotonic() + 5.0
    while not writer.stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.stopped and done == [1]


def test_handover_shortens_the_switch_interval_for_the_block_only() -> None:
    """Within `handover` a thread waiting for the GIL gets it within 1 ms; after the block
    (also when it raises) the interpreter's interval is what it was."""
    before = sys.getswitchinterval()
    with handover():
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == before
    with pytest.raises(RuntimeError), handover():
        raise RuntimeError("the run failed")
    assert sys.getswitchinterval() == before


def test_snapshot_cut_from_the_state_is_the_simulations_snapshot(on_cpu: str) -> None:
    """The snapshot the observers cut from a `state()` copy equals `Simulation.snapshot()` bit
    for bit, also with a particle flagged for removal (left out of both)."""
    sim = Simulation(load_config(QUICK))
    for _ in range(3):
        sim.step()
    p = sim.particles
    removed = p.removed.to_numpy()
    fluid = np.flatnonzero(p.kind.to_numpy()[: p.count] == ParticleKind.FLUID)
    for flagged in (False, True):
        if flagged:
            removed[fluid[5]] = 1
            p.removed.from_numpy(removed)
        expected, got = sim.snapshot(), snapshot_from_state(sim.state())
        assert (got.time, got.step) == (expected.time, expected.step)
        assert got.count == p.count - int(flagged)
        for name in FIELDS:
            a, b = getattr(got, name), getattr(expected, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def test_a_write_failing_in_the_background_stops_the_run_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 4th .npz write fails on the writer's thread: `dambreak run` exits 1 with the error
    and says what was written is intact; the .pvd lists the snapshots written before, all
    readable, with their .npz; no summary, no temporary left behind."""
    real = observers_module.write_snapshot_npz
    calls = []

    def fail_on_the_fourth(path: Path, *args: object) -> None:
        calls.append(path)
        if len(calls) == 4:
            raise PermissionError(13, "Permission denied", str(path))
        real(path, *args)

    monkeypatch.setattr(observers_module, "write_snapshot_npz", fail_on_the_fourth)
    out = tmp_path / "run"
    assert dambreak_run(*quick_args(out, "--set=output.npz=true")) == 1
    err = capsys.readouterr().err
    assert "could not write the output" in err and "Permission denied" in err
    assert "particles_00003.npz" in err and "intact" in err
    assert not (out / "summary.json").exists()
    listed = read_pvd(out / "particles.pvd")
    assert [p.name for _, p in listed][:3] == [f"particles_{k:05d}.vtp" for k in range(3)]
    for _, path in listed:
        read_snapshot(path)
    for k in range(3):
        read_snapshot_npz(out / f"particles_{k:05d}.npz")
    assert not (out / "particles_00003.npz").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def slow_vtp_and_checked_checkpoints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every .vtp write 0.3 s slower (the writer falls behind the loop), and every
    checkpoint write check first that each snapshot it counts is on disk, readable, and listed
    in the .pvd on disk (a failed check in the writer's thread fails the run, exit 1). Returns
    the snapshot counts of the checkpoints written, in order."""
    real_vtp = vtk_module.write_snapshot

    def slow_vtp(*args: object) -> None:
        time.sleep(0.3)
        real_vtp(*args)

    monkeypatch.setattr(vtk_module, "write_snapshot", slow_vtp)
    real_checkpoint = run_module.write_checkpoint
    seen: list[int] = []

    def checked_checkpoint(out_dir: Path, checkpoint) -> Path:
        written = checkpoint.observers["snapshots_written"]
        listed = [p.name for _, p in read_pvd(out_dir / "particles.pvd")]
        assert listed == [f"particles_{k:05d}.vtp" for k in range(written)]
        for name in listed:
            read_snapshot(out_dir / name)
        seen.append(written)
        return real_checkpoint(out_dir, checkpoint)

    monkeypatch.setattr(run_module, "write_checkpoint", checked_checkpoint)
    return seen


def test_checkpoints_reach_the_disk_after_their_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a slow writer, every periodic checkpoint is written only when every snapshot it
    counts is on disk and listed in the .pvd on disk; the summary reports the time the loop
    waited on the writer and the time the writer wrote."""
    seen = slow_vtp_and_checked_checkpoints(monkeypatch)
    out = tmp_path / "run"
    assert dambreak_run(*quick_args(out, "--checkpoint-every=0.03")) == 0
    assert seen == [4, 7, 10]
    assert read_checkpoint(out).observers["snapshots_written"] == 10
    summary = json.loads((out / "summary.json").read_text())
    # The loop waited at the end for the last snapshot's write (0.3 s of sleep), less the few
    # milliseconds between submitting it and closing the writer: more than half of it.
    assert summary["output_wait_s"] > 0.15
    assert summary["output_write_s"] > 11 * 0.3


def test_stop_and_failure_checkpoints_come_after_their_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """With a slow writer: a stop requested after 60 steps (as by SIGINT) exits 130 with a
    checkpoint of the state reached, written after every snapshot before it; a NaN before step
    31 exits 3 with the last good state's checkpoint, written after the snapshots queued
    before the failure, which all stay."""
    seen = slow_vtp_and_checked_checkpoints(monkeypatch)
    checks = []

    def requested(stop: StopRequest) -> bool:
        checks.append(1)
        if len(checks) > 60:
            stop.signal_name = "SIGINT"
        return stop.signal_name is not None

    with monkeypatch.context() as patch:
        patch.setattr(StopRequest, "requested", property(requested))
        # one-step batches, as without neighbour lists, so that the stop comes at step 60
        assert dambreak_run(*quick_args(tmp_path / "stopped", ONE_STEP_BATCHES)) == 130
    assert "SIGINT: stopped at step 60" in capsys.readouterr().err
    stopped = read_checkpoint(tmp_path / "stopped")
    assert stopped.steps == 60 and seen == [stopped.observers["snapshots_written"]] and seen[0] >= 3

    advance = Simulation.advance

    def advance_with_nan(sim: Simulation, until: float, max_steps: int) -> None:
        if sim.steps == 30:  # the batches are one step long (no skin)
            velocity = sim.particles.velocity.to_numpy()
            velocity[:] = np.nan
            sim.particles.velocity.from_numpy(velocity)
        advance(sim, until, max_steps)

    monkeypatch.setattr(Simulation, "advance", advance_with_nan)
    out = tmp_path / "failed"
    assert dambreak_run(*quick_args(out, ONE_STEP_BATCHES)) == 3
    assert "kept: " in capsys.readouterr().err
    kept = read_checkpoint(out)
    listed = read_pvd(out / "particles.pvd")
    assert seen[1:] == [len(listed)] and kept.steps == read_snapshot(listed[-1][1]).step
