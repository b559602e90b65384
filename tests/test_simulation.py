"""The time loop and `dambreak run` end to end: a short quick dam break (no NaN, the front moves
forward, the fluid stays in the tank), the run folder (.vtp snapshots, .pvd, config.toml,
probes.csv, summary.json), snapshots read back bit for bit, the command's exit codes, the
symplectic integrator against Verlet, and particle removal.

`run_simulation` and `run_command` start Taichi themselves; `run_in_process` tells conftest so,
so that the next test using its fixtures starts Taichi afresh.
"""

import argparse
import csv
import json
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import conftest
import numpy as np
import pytest
from conftest import use_backend

from solver.backend import BackendError
from solver.config import Config, load_config
from solver.output.probes import read_probes
from solver.output.vtk import read_pvd, read_snapshot, write_snapshot
from solver.particle_kind import ParticleKind
from solver.removal_log import REMOVED_CSV
from solver.run import run_command, run_simulation
from solver.simulation import Simulation
from solver.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quick.toml"
FLUID = int(ParticleKind.FLUID)
QUICK_END = 0.2
QUICK_INTERVAL = 0.02
QUICK_OVERRIDES = [f"time.end={QUICK_END}", f"time.output_interval={QUICK_INTERVAL}"]


def forget_backend() -> None:
    """Tell conftest that Taichi was (re)started behind its back."""
    conftest._current = None


def run_in_process(cfg: Config, out_dir: Path, backend: str = "cpu", **options) -> dict:
    """run_simulation without the progress bar; skips when an optional backend is missing."""
    try:
        return run_simulation(cfg, out_dir, backend=backend, show_progress=False, **options)
    except BackendError as error:
        if backend in conftest.REQUIRED or backend == "cpu":
            raise
        pytest.skip(f"backend {backend} not available here: {error}")
    finally:
        forget_backend()


def command(
    config: Path | str | None, out: Path, *overrides: str, backend: str = "cpu", force: bool = False
) -> int:
    """`dambreak run CONFIG --backend B --out OUT --set ... [--force]`, through run_command."""
    args = argparse.Namespace(
        config=None if config is None else str(config),
        overrides=list(overrides),
        backend=backend,
        threads=None,
        out=str(out),
        force=force,
        resume=None,
        checkpoint_every=None,
    )
    try:
        return run_command(args)
    finally:
        forget_backend()


def fluid_front(snap: Snapshot) -> float:
    """The largest x of the fluid."""
    return float(snap.position[snap.kind == FLUID, 0].max())


@dataclass
class Run:
    """A finished run: its config, folder, summary and snapshots (in .pvd order)."""

    cfg: Config
    out: Path
    summary: dict
    times: list[float]
    snapshots: list[Snapshot]


def finished_run(cfg: Config, out: Path, **options) -> Run:
    """Run `cfg` on the CPU into `out` and read back everything the .pvd lists."""
    summary = run_in_process(cfg, out, **options)
    listed = read_pvd(out / "particles.pvd")
    return Run(cfg, out, summary, [t for t, _ in listed], [read_snapshot(f) for _, f in listed])


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """configs/quick.toml to 0.2 s with a snapshot every 0.02 s, Verlet, on the CPU."""
    cfg = load_config(QUICK, QUICK_OVERRIDES)
    return finished_run(cfg, tmp_path_factory.mktemp("quick") / "run")


# --------------------------------------------------------------------------- the dam break


def test_quick_dam_break_has_no_nan(quick_run: Run) -> None:
    """Every field of every snapshot is finite, nothing was removed, densities stay in the
    allowed band and wall particles stay at or above rho0 (the DBC clamp)."""
    cfg = quick_run.cfg
    first = quick_run.snapshots[0]
    for snap in quick_run.snapshots:
        for name in ("position", "velocity", "density", "pressure"):
            assert np.all(np.isfinite(getattr(snap, name))), (name, snap.time)
        assert snap.count == first.count
        assert np.all(snap.density >= cfg.physics.rho_min)
        assert np.all(snap.density <= cfg.physics.rho_max)
        assert np.all(snap.density[snap.kind != FLUID] >= cfg.physics.rho0)
    assert quick_run.summary["removed"] == 0


def test_front_moves_forward(quick_run: Run) -> None:
    """The largest x of the fluid (and its 99th percentile) grows from snapshot to snapshot in
    the first 0.2 s, by more than 2 dp in all, and never outruns the ideal (frictionless,
    shallow-water) dam-break front of Ritter (1892), x0 + 2 sqrt(g h0) t, by more than dp."""
    cfg = quick_run.cfg
    fronts = [fluid_front(s) for s in quick_run.snapshots]
    p99 = [float(np.percentile(s.position[s.kind == FLUID, 0], 99)) for s in quick_run.snapshots]
    assert len(fronts) == round(QUICK_END / QUICK_INTERVAL) + 1
    assert np.all(np.diff(fronts) > 0.0), fronts
    assert np.all(np.diff(p99) > 0.0), p99
    assert fronts[-1] - fronts[0] > 2.0 * cfg.dp
    celerity = 2.0 * math.sqrt(cfg.gravity_magnitude * 0.3)
    for time, front in zip(quick_run.times, fronts, strict=True):
        assert front <= fronts[0] + celerity * time + cfg.dp, (time, front)


def test_no_fluid_leaves_the_tank(quick_run: Run) -> None:
    """The dynamic boundary walls hold the water: every fluid particle of every snapshot lies
    inside the tank's inner box; with nothing removed, the run writes no removed.csv."""
    lo = np.array(quick_run.cfg.tank.box.min)
    hi = np.array(quick_run.cfg.tank.box.max)
    for snap in quick_run.snapshots:
        x = snap.position[snap.kind == FLUID]
        assert np.all(x >= lo) and np.all(x <= hi), snap.time
    assert quick_run.summary["removed"] == 0
    assert not (quick_run.out / REMOVED_CSV).exists()
    assert "removed_file" not in quick_run.summary


def test_summary_has_every_key(quick_run: Run) -> None:
    """summary.json holds what the spec lists (backend, versions, particles by kind, steps,
    simulated time, wall and compile time, particle-steps per second, mass at start and end,
    particles removed, the time spent waiting on and writing the output, the neighbour grid's
    cell sizes) with consistent values, and equals the returned summary."""
    saved = json.loads((quick_run.out / "summary.json").read_text())
    assert saved == json.loads(json.dumps(quick_run.summary))
    cfg = quick_run.cfg
    for key in (
        "backend",
        "device",
        "precision",
        "dambreak_version",
        "taichi_version",
        "python_version",
        "particles",
        "steps",
        "simulated_time",
        "wall_time_s",
        "compile_time_s",
        "particle_steps_per_second",
        "mass_initial",
        "mass_final",
        "removed",
        "snapshots",
        "output_wait_s",
        "output_write_s",
    ):
        assert key in saved, key
    assert saved["backend"] == "cpu" and saved["precision"] == "f32"
    assert saved["taichi_version"] == "1.7.4"
    particles = saved["particles"]
    first = quick_run.snapshots[0]
    for kind in ParticleKind:
        assert particles[kind.name.lower()] == int(np.count_nonzero(first.kind == kind))
    assert particles["total"] == first.count == sum(particles[k.name.lower()] for k in ParticleKind)
    assert saved["steps"] == quick_run.snapshots[-1].step > 100
    assert saved["simulated_time"] == pytest.approx(QUICK_END, rel=1e-9)
    assert 0.0 < saved["compile_time_s"] < saved["wall_time_s"]
    steps_rate = saved["steps"] * particles["total"] / saved["wall_time_s"]
    assert steps_rate <= saved["particle_steps_per_second"] < 100 * steps_rate
    assert saved["mass_initial"] == pytest.approx(particles["fluid"] * cfg.particle_mass)
    assert saved["mass_final"] == saved["mass_initial"]
    assert saved["removed"] == 0
    assert saved["snapshots"] == len(quick_run.snapshots)
    # the neighbour grid as the backend resolved it: cubic cells of half the support on the CPU
    assert saved["neighbor_cell_sizes"] == pytest.approx([cfg.support_radius / 2] * 3)

    # The loop waited on the background writer for part of its time at most; the writer
    # wrote something.
    assert 0.0 <= saved["output_wait_s"] < saved["wall_time_s"]
    assert 0.0 < saved["output_write_s"] < saved["wall_time_s"]


def _neighbours_per_particle(position: np.ndarray, radius: float) -> float:
    """Pairs closer than `radius`, counted from both ends, per particle (brute force)."""
    x = position.astype(np.float64)
    total = 0
    for start in range(0, len(x), 1024):
        d2 = ((x[start : start + 1024, None, :] - x[None, :, :]) ** 2).sum(axis=2)
        total += int(np.count_nonzero(d2 < radius * radius)) - len(d2)  # not i with itself
    return total / len(x)


def test_summary_counts_the_neighbours_of_the_run(quick_run: Run) -> None:
    """summary.json's neighbours per particle is the run's mean, from counts at its output
    times weighted by the steps between them (trapezoids), as a brute-force count of every
    snapshot gives it; its neighbour interactions per second are that times particle-steps."""
    counts = [
        _neighbours_per_particle(snap.position, quick_run.cfg.support_radius)
        for snap in quick_run.snapshots
    ]
    steps = [snap.step for snap in quick_run.snapshots]
    weighted = sum(
        (steps[k] - steps[k - 1]) * 0.5 * (counts[k - 1] + counts[k]) for k in range(1, len(steps))
    )
    expected = weighted / (steps[-1] - steps[0])
    summary = quick_run.summary
    assert 30 < expected < 200
    assert summary["neighbours_per_particle"] == pytest.approx(expected, rel=1e-3)
    assert summary["neighbour_interactions_per_second"] == pytest.approx(
        summary["particle_steps_per_second"] * summary["neighbours_per_particle"]
    )


def test_pvd_lists_every_snapshot_with_its_time(quick_run: Run) -> None:
    """particles.pvd is a VTK Collection listing every particles_NNNNN.vtp of the folder in
    order, with times strictly increasing, equal to each file's TIME field and landing on the
    output times k * output_interval."""
    root = ET.parse(quick_run.out / "particles.pvd").getroot()
    assert root.tag == "VTKFile" and root.get("type") == "Collection"
    entries = [(float(d.get("timestep")), d.get("file")) for d in root.iter("DataSet")]
    files = sorted(p.name for p in quick_run.out.glob("particles_*.vtp"))
    assert [name for _, name in entries] == files
    assert files == [f"particles_{k:05d}.vtp" for k in range(len(files))]
    times = [t for t, _ in entries]
    assert np.all(np.diff(times) > 0.0)
    for k, (time, name) in enumerate(entries):
        snap = read_snapshot(quick_run.out / name)
        assert snap.time == time
        assert time == pytest.approx(k * QUICK_INTERVAL, abs=1e-9)
    steps = [s.step for s in quick_run.snapshots]
    assert steps[0] == 0 and np.all(np.diff(steps) > 0)


def test_snapshot_files_are_compressed_binary_vtk(quick_run: Run) -> None:
    """The .vtp files are VTK XML PolyData with appended raw binary data, compressed with LZ4
    (output.vtk_compression's default), and carry id, kind, velocity, pressure and density."""
    assert quick_run.cfg.output.vtk_compression == "lz4"
    head = (quick_run.out / "particles_00001.vtp").read_bytes()[:4000]
    assert b'type="PolyData"' in head
    assert b'compressor="vtkLZ4DataCompressor"' in head
    assert b'<AppendedData encoding="raw">' in (quick_run.out / "particles_00001.vtp").read_bytes()
    for name in (b'"id"', b'"kind"', b'"velocity"', b'"pressure"', b'"density"'):
        assert b"Name=" + name in head


def test_config_toml_reloads_to_an_equal_config(quick_run: Run) -> None:
    """The resolved config written into the run folder loads back to an equal Config."""
    assert load_config(quick_run.out / "config.toml") == quick_run.cfg


def test_probes_csv(quick_run: Run) -> None:
    """probes.csv has one column per probe, sampled at the snapshot times; the gauge in the
    water column reads the initial depth 0.3 m within dp at t = 0 and then falls, and the gauge
    at x = 1.3 m, which the water has not reached by 0.2 s, reads 0."""
    times, series = read_probes(quick_run.out / "probes.csv")
    assert list(series) == ["H_column", "H_behind"]
    np.testing.assert_array_equal(times, quick_run.times)
    column = series["H_column"]
    assert column[0] == pytest.approx(0.3, abs=quick_run.cfg.dp)
    assert np.all(np.diff(column) <= 1e-3) and column[-1] < column[0]
    assert np.all(series["H_behind"] == 0.0)


# --------------------------------------------------------------------------- snapshots


@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_snapshot_reads_back_bit_for_bit(precision: str, tmp_path: Path) -> None:
    """Simulation.snapshot() written with write_snapshot and read back with vtk's XML reader
    (read_snapshot) is identical bit for bit: every array with its dtype, the time and step."""
    use_backend("cpu", precision)
    cfg = load_config(QUICK, [f"physics.precision={precision}"])
    sim = Simulation(cfg)
    for _ in range(20):
        sim.step()
    written = sim.snapshot()
    path = tmp_path / "particles_00000.vtp"
    write_snapshot(path, written)
    read = read_snapshot(path)
    assert read.time == written.time and read.step == written.step == 20
    for name in ("position", "velocity", "density", "pressure", "kind", "id"):
        a, b = getattr(written, name), getattr(read, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name
    real = np.float64 if precision == "f64" else np.float32
    assert read.position.dtype == real
    assert np.any(read.velocity != 0.0)  # the water moves: a real test


# --------------------------------------------------------------------------- the command


def test_run_command_rejects_an_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A wrong key, from --set or in the file, exits with 2, names the key, writes nothing."""
    out = tmp_path / "out"
    assert command(QUICK, out, "physics.viscosity=0.2") == 2
    assert "physics.viscosity" in capsys.readouterr().err
    case = tmp_path / "case.toml"
    case.write_text(QUICK.read_text() + "\n[output]\nsnapshot_every = 3\n")
    assert command(case, out) == 2
    err = capsys.readouterr().err
    assert "snapshot_every" in err and "case.toml" in err
    assert not out.exists()


def test_run_command_rejects_f64_on_vulkan(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """f64 on Vulkan is refused before anything starts (check_capabilities): exit 2, a message
    about the precision, and the output folder (existing and empty) stays empty."""
    out = tmp_path / "out"
    out.mkdir()
    assert command(QUICK, out, "physics.precision=f64", backend="vulkan") == 2
    err = capsys.readouterr().err
    assert "f64" in err and "vulkan" in err
    assert list(out.iterdir()) == []
    assert command(QUICK, tmp_path / "missing", "physics.precision=f64", backend="vulkan") == 2
    assert not (tmp_path / "missing").exists()


def test_run_command_keeps_existing_results_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """An output folder that holds anything is refused without --force (exit 2, files untouched);
    with --force the run succeeds (exit 0), replaces the run's own files (a stale snapshot is
    gone) and leaves other files alone."""
    out = tmp_path / "out"
    out.mkdir()
    old = {"summary.json": "old summary\n", "particles_00042.vtp": "stale\n", "notes.txt": "mine\n"}
    for name, text in old.items():
        (out / name).write_text(text)
    stamps = {name: os.stat(out / name).st_mtime_ns for name in old}
    tiny = ("time.end=0.004", "time.output_interval=0.002")
    assert command(QUICK, out, *tiny) == 2
    assert "--force" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == sorted(old)
    for name, text in old.items():
        assert (out / name).read_text() == text
        assert os.stat(out / name).st_mtime_ns == stamps[name]
    assert command(QUICK, out, *tiny, force=True) == 0
    assert (out / "notes.txt").read_text() == "mine\n"
    assert not (out / "particles_00042.vtp").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulated_time"] == pytest.approx(0.004)
    assert sorted(p.name for p in out.glob("particles_*.vtp")) == [
        "particles_00000.vtp",
        "particles_00001.vtp",
        "particles_00002.vtp",
    ]


# --------------------------------------------------------------------------- integrators


def test_symplectic_runs_close_to_verlet(quick_run: Run, tmp_path: Path) -> None:
    """The symplectic scheme runs the quick case to 0.1 s without NaN and its front stays within
    dp/4 of Verlet's at every snapshot (measured: 4e-4 m, 0.01 dp): both integrate the same
    equations to second order."""
    cfg = load_config(
        QUICK,
        ["time.end=0.1", f"time.output_interval={QUICK_INTERVAL}", "time.integrator=symplectic"],
    )
    run = finished_run(cfg, tmp_path / "symplectic")
    assert run.summary["removed"] == 0
    assert len(run.snapshots) == 6
    for snap, verlet in zip(run.snapshots, quick_run.snapshots, strict=False):
        assert snap.time == pytest.approx(verlet.time, abs=1e-9)
        for name in ("position", "velocity", "density", "pressure"):
            assert np.all(np.isfinite(getattr(snap, name)))
        assert abs(fluid_front(snap) - fluid_front(verlet)) < 0.25 * cfg.dp
    assert fluid_front(run.snapshots[-1]) > fluid_front(run.snapshots[0]) + cfg.dp


def test_symplectic_with_a_skin_sorts_seldom_and_finds_every_neighbour(tmp_path: Path) -> None:
    """With a skin the symplectic scheme sorts only when a step, or its predictor's half step,
    may use the skin up: over 0.05 s of the quick case a tenth of the sorts or fewer, against
    two a step without one. Every neighbour is still found, so the particles follow those of
    the run that sorts before each interaction to rounding (measured 6.6e-7 m, 2e-5 dp, over
    0.1 s; a missed neighbour would part them by orders more)."""
    runs = {}
    for skin in (0.0, 0.1):
        overrides = ["time.end=0.05", "time.output_interval=0.025", "time.integrator=symplectic"]
        cfg = load_config(QUICK, [*overrides, f"neighbors.skin={skin}"])
        runs[skin] = finished_run(cfg, tmp_path / f"skin{skin}")
    steps = runs[0.0].summary["steps"]
    assert runs[0.1].summary["steps"] == steps
    assert runs[0.0].summary["sorts"] >= 2 * steps - 1
    assert runs[0.1].summary["sorts"] <= steps // 10
    for every, seldom in zip(runs[0.0].snapshots, runs[0.1].snapshots, strict=True):
        a, b = np.argsort(every.id), np.argsort(seldom.id)
        assert np.array_equal(every.id[a], seldom.id[b])
        apart = np.linalg.norm(every.position[a] - seldom.position[b], axis=1)
        assert apart.max() < 1e-3 * cfg.dp


# --------------------------------------------------------------------------- removal


def test_particles_leaving_the_domain_are_removed_and_counted(tmp_path: Path) -> None:
    """With gravity pointing up and the domain cut 5 cm above the open top of the tank (and no
    limit on the share removed), water 'falls' out of the domain: those particles are removed
    and counted (summary removed and removed_by_reason), the fluid mass drops by exactly
    removed * m, later snapshots hold the survivors only (ids unique), and the run goes on to
    its end without NaN. removed.csv lists each removed particle once, where it left the
    domain (above its top), with the reason and a time within the run."""
    cfg = load_config(
        QUICK,
        [
            "time.end=0.2",
            "time.output_interval=0.05",
            "physics.gravity=[0.0, 0.0, 9.81]",
            "domain.min=[-0.25, -0.25, -0.25]",
            "domain.max=[1.85, 0.92, 0.45]",
            "physics.max_removed=1.0",
        ],
    )
    run = finished_run(cfg, tmp_path / "up")
    summary = run.summary
    removed = summary["removed"]
    assert removed > 0
    assert summary["removed_by_reason"]["outside_domain"] == removed
    assert summary["simulated_time"] == pytest.approx(0.2)
    fluid0 = summary["particles"]["fluid"]
    assert summary["mass_final"] == pytest.approx((fluid0 - removed) * cfg.particle_mass, rel=1e-12)
    # quick.toml's 0.3 m of water is 7.5 dp deep at dp 0.04: summary.json keeps the note.
    assert any("along z is built as 8 layers" in note for note in summary["lattice_notes"])
    last = run.snapshots[-1]
    assert int(np.count_nonzero(last.kind == FLUID)) == fluid0 - removed
    assert len(np.unique(last.id)) == last.count == summary["particles"]["total"] - removed
    assert np.all(last.position[:, 2] <= cfg.domain.max[2])
    for snap in run.snapshots:
        assert np.all(np.isfinite(snap.position)) and np.all(np.isfinite(snap.density))
    assert summary["removed_file"] == REMOVED_CSV
    with open(run.out / REMOVED_CSV) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == removed
    assert {row["reason"] for row in rows} == {"outside_domain"}
    ids = [int(row["id"]) for row in rows]
    assert len(set(ids)) == removed and not set(ids) & set(last.id.tolist())
    assert all(float(row["z"]) > cfg.domain.max[2] for row in rows)
    assert all(0.0 < float(row["time"]) <= 0.2 + 1e-9 for row in rows)
    assert all(float(row["vz"]) > 0.0 for row in rows)


def test_removal_log_survives_a_restore(on_cpu: str) -> None:
    """Water 'falling' up out of the domain (as above), the state taken halfway, after the
    first removals, and restored into a fresh simulation: its removal log goes on to the very
    rows of the run that was never interrupted, each particle once."""
    overrides = [
        "physics.gravity=[0.0, 0.0, 9.81]",
        "domain.min=[-0.25, -0.25, -0.25]",
        "domain.max=[1.85, 0.92, 0.45]",
        "physics.max_removed=1.0",
    ]
    cfg = load_config(QUICK, overrides)
    whole = Simulation(cfg)
    whole.advance(0.12)
    while len(whole.removal_log) == 0:  # removals logged (at a sort) before the state
        whole.advance(whole.time + 0.02)
    state = whole.state()
    restored = Simulation(cfg)
    restored.restore(state)
    for sim in (whole, restored):  # advance stops early at a sort due: go on to the end
        while sim.time < 0.2:
            sim.advance(0.2)
        sim.log_removals()
    rows = whole.removal_log.rows()
    assert len(rows) == whole.flagged > len(state["removal_log"]) > 0
    assert np.array_equal(restored.removal_log.rows(), rows)
    assert len(np.unique(rows[:, 2])) == len(rows)


def test_a_runaway_particle_is_removed_and_the_run_goes_on(on_cpu: str) -> None:
    """The top fluid particle of the column, given 50 m/s upward, leaves the domain (cut 5 cm
    above the tank) and the density band within 200 steps; it is removed (counted by reason,
    gone from snapshots), and the time step, which it had shrunk through 10 v_max, comes back."""
    cfg = load_config(QUICK, ["domain.min=[-0.25, -0.25, -0.25]", "domain.max=[1.85, 0.92, 0.45]"])
    sim = Simulation(cfg)
    p = sim.particles
    sim.step()
    normal_dt = sim.dt
    ids = p.id.to_numpy()[: p.count]
    x = p.position.to_numpy()[: p.count]
    fluid = p.kind.to_numpy()[: p.count] == FLUID
    top = fluid & (x[:, 2] == x[fluid, 2].max())
    runaway = int(ids[top][np.argmin(np.abs(x[top, 0] - 0.2) + np.abs(x[top, 1] - 0.335))])
    ids = p.id.to_numpy()
    velocity = p.velocity.to_numpy()
    velocity[ids == runaway] = (0.0, 0.0, 50.0)
    p.velocity.from_numpy(velocity)
    p.velocity_prev.from_numpy(velocity)
    for _ in range(200):
        sim.step()
        if sim.removed:
            break
    assert sim.removed == 1
    # it leaves the water so fast that its density (continuity equation) usually drops below
    # rho_min before it reaches the domain's edge: either reason counts
    reasons = sim.removed_by_reason()
    assert set(reasons) == {"outside_domain", "density_out_of_band"}
    assert sum(reasons.values()) == 1
    assert runaway not in sim.snapshot().id
    for _ in range(5):
        sim.step()
    snap = sim.snapshot()
    assert runaway not in snap.id and snap.count == len(sim.scene.kind) - 1
    assert np.all(np.isfinite(snap.position)) and np.all(np.isfinite(snap.velocity))
    assert sim.dt == pytest.approx(normal_dt, rel=0.5)
