"""Domain decomposition over MPI: the slabs, and runs of 2 and 3 processes on the CPU that
give snapshots and probes bit for bit those of one process, stop together on a signal, resume
on another number of processes, and end when one process is killed.

The runs need mpi4py and an MPI launcher (`pip install -e '.[mpi]'`); without them those
tests skip with the reason, except where DAMBREAK_REQUIRE_MPI=1 (.ci/run), where they fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

from solver.distributed.decomposition import Slabs, balanced_slabs, halo_columns
from solver.distributed.world import launched_processes
from solver.output.checkpoint import read_checkpoint
from solver.output.npz import read_snapshot_npz

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "configs" / "quick.toml"
FIELDS = ("position", "velocity", "density", "pressure", "kind", "id")


# ----------------------------------------------------------------------------- the slabs


def test_balanced_slabs_split_the_particles_evenly_by_whole_columns() -> None:
    histogram = np.array([0, 10, 10, 10, 10, 0, 0, 20, 20, 0])
    slabs = balanced_slabs(histogram, 3, halo=2)
    assert slabs.starts[0] == 0 and slabs.starts[-1] == 10
    assert list(slabs.loads(histogram)) == [30, 30, 20]
    assert slabs.imbalance(histogram) == pytest.approx(30 / (80 / 3))
    assert list(slabs.owner(np.arange(10))) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]


def test_every_slab_keeps_a_column_even_where_there_are_no_particles() -> None:
    slabs = balanced_slabs(np.array([100, 0, 0, 0]), 4, halo=1)
    assert slabs.starts == (0, 1, 2, 3, 4)
    with pytest.raises(ValueError, match="5 processes for a grid of 4 cell columns"):
        balanced_slabs(np.array([1, 1, 1, 1]), 5, halo=1)


def test_the_halo_is_the_columns_near_a_slab_and_not_in_it() -> None:
    slabs = Slabs((0, 4, 8, 12), halo=2)
    assert list(np.nonzero(slabs.in_halo(np.arange(12), 1))[0]) == [2, 3, 8, 9]
    assert list(np.nonzero(slabs.in_halo(np.arange(12), 0))[0]) == [4, 5]


def test_counting_regions_partition_the_line() -> None:
    slabs = Slabs((0, 3, 7, 10), halo=2)
    regions = [slabs.region(r, 0.1, 0.05, np.float32) for r in range(3)]
    assert regions[0][0] < -1e37 and regions[-1][1] > 1e37
    assert regions[0][1] == regions[1][0] == float(np.float32(0.1 + 3 * 0.05))
    assert regions[1][1] == regions[2][0]


def test_halo_covers_the_neighbours_and_the_mdbc_ghost_nodes() -> None:
    # support 2, search 2.2, skin and one step 0.3, cells of 1: DBC needs 2 + 0.9 -> 3 + 1
    assert halo_columns(2.0, 2.2, 0.3, 0.0, 1.0) == 4
    # mDBC: a boundary neighbour's ghost node 1.5 farther, searched within 2.2: 6.6 -> 7 + 1
    assert halo_columns(2.0, 2.2, 0.3, 1.5, 1.0) == 8


def test_mpi_launches_are_recognised_from_the_environment() -> None:
    assert launched_processes({}) == 1
    assert launched_processes({"PMI_SIZE": "3"}) == 3
    assert launched_processes({"OMPI_COMM_WORLD_SIZE": "2"}) == 2


# ------------------------------------------------------------------------------ the runs


def _mpiexec() -> str:
    """The MPI launcher, or skip (fail where DAMBREAK_REQUIRE_MPI=1)."""
    reason = None
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        reason = "mpi4py is not installed (pip install -e '.[mpi]')"
    # pip puts the runtime's launcher beside the interpreter's scripts (maybe not on PATH)
    places = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    launcher = shutil.which("mpiexec", path=os.pathsep.join([*places, os.environ["PATH"]]))
    if launcher is None:
        reason = reason or "no mpiexec on PATH"
    if reason is not None:
        if os.environ.get("DAMBREAK_REQUIRE_MPI") == "1":
            pytest.fail(f"MPI required here: {reason}")
        pytest.skip(reason)
    return launcher


def _run_argv(out: Path, end: float, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "solver.cli", "run", str(QUICK), "--backend=cpu", "--threads=1",
        f"--out={out}", f"--set=time.end={end}", "--set=time.output_interval=0.01",
        "--set=output.vtk=false", "--set=output.npz=true", "--set=neighbors.skin=0.1",
        "--set=output.probe_interval=0.002", "--set=neighbors.pair_halves=false", *extra,
    ]  # fmt: skip


ENV = os.environ | {"TI_OFFLINE_CACHE": "0", "PYTHONPATH": str(ROOT)}


def _launch(processes: int, argv: list[str]) -> subprocess.Popen:
    command = argv if processes == 1 else [_mpiexec(), "-n", str(processes), *argv]
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def _finish(child: subprocess.Popen, timeout: float = 300.0) -> tuple[int, str]:
    _, err = child.communicate(timeout=timeout)
    return child.returncode, err


def assert_same_snapshots(run: Path, reference: Path) -> None:
    """Every snapshot of `reference` is in `run`, equal bit for bit, and probes.csv too."""
    names = sorted(p.name for p in reference.glob("particles_*.npz"))
    assert len(names) >= 3
    assert sorted(p.name for p in run.glob("particles_*.npz")) == names
    for name in names:
        a, b = read_snapshot_npz(run / name), read_snapshot_npz(reference / name)
        assert (a.time, a.step) == (b.time, b.step), name
        for field in FIELDS:
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == y.dtype and x.shape == y.shape, f"{name} {field}"
            assert x.tobytes() == y.tobytes(), f"{name} {field} differs"
    assert (run / "probes.csv").read_text() == (reference / "probes.csv").read_text()


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick case to 0.03 s in one process, with a skin, so that steps between sorts
    exchange halos."""
    out = tmp_path_factory.mktemp("one") / "run"
    code, err = _finish(_launch(1, _run_argv(out, 0.03)))
    assert code == 0, err
    return out


@pytest.mark.parametrize("skin", [0.0, 0.01])
def test_the_symplectic_scheme_gives_the_snapshots_of_one_process(
    tmp_path: Path, skin: float
) -> None:
    """The symplectic scheme (predictor, second interaction, corrector) on 2 processes: each
    of its two interactions a step first sorts, where particles change slabs, or exchanges
    the halo. The snapshots and probes are those of one process bit for bit, with no skin
    (a sort before both interactions of every step) and with a thin one (mostly exchanges,
    a few sorts)."""
    _mpiexec()
    extra = ("--set=time.integrator=symplectic", f"--set=neighbors.skin={skin}")
    one, two = tmp_path / "one", tmp_path / "two"
    code, err = _finish(_launch(1, _run_argv(one, 0.03, *extra)))
    assert code == 0, err
    code, err = _finish(_launch(2, _run_argv(two, 0.03, *extra)))
    assert code == 0, err
    assert_same_snapshots(two, one)
    import json

    summary = json.loads((two / "summary.json").read_text())
    assert summary["ranks"] == 2
    if skin == 0.0:
        # at the start and the middle of every step (the first starts from the first sort)
        assert summary["sorts"] == 2 * summary["steps"] - 1
    else:
        assert 2 <= summary["sorts"] < summary["steps"] // 4


@pytest.mark.parametrize("processes", [2, 3])
def test_several_processes_give_the_snapshots_of_one(
    one_process: Path, tmp_path: Path, processes: int
) -> None:
    _mpiexec()
    out = tmp_path / "run"
    code, err = _finish(_launch(processes, _run_argv(out, 0.03)))
    assert code == 0, err
    assert_same_snapshots(out, one_process)
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"] == processes
    slabs = summary["decomposition"]["slab_columns"]
    assert len(slabs) == processes + 1 and slabs == sorted(set(slabs))
    assert summary["decomposition"]["imbalance_max"] < 1.5
    assert 0.0 < summary["exchange_share"] < 1.0
    assert (
        summary["particles"] == json.loads((one_process / "summary.json").read_text())["particles"]
    )
    assert err.count("done:") == 1  # rank 0 alone reports


def test_sigint_stops_every_process_and_resume_on_another_count_is_bitwise(
    one_process: Path, tmp_path: Path
) -> None:
    _mpiexec()
    out = tmp_path / "run"
    child = _launch(2, _run_argv(out, 0.03, "--checkpoint-every=0.005"))
    deadline = time.monotonic() + 240
    while not (out / "particles_00001.npz").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    code, err = _finish(child)
    assert code == 130, err
    assert "resume with: dambreak run --resume" in err
    assert not (out / "summary.json").exists()
    assert 0.0 < read_checkpoint(out).time < 0.03
    code, err = _finish(_launch(3, [*_run_argv(out, 0.03)[:4], f"--resume={out}"]))
    assert code == 0, err
    assert_same_snapshots(out, one_process)


def test_a_killed_process_ends_the_whole_job(tmp_path: Path) -> None:
    _mpiexec()
    out = tmp_path / "run"
    child = _launch(2, _run_argv(out, 1.0))
    deadline = time.monotonic() + 240
    while not (out / "particles_00001.npz").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ranks = _rank_processes(child.pid)
    assert len(ranks) == 2, ranks
    os.kill(ranks[-1], signal.SIGKILL)
    code, _ = _finish(child, timeout=120)
    assert code != 0
    assert not (out / "summary.json").exists()
    for pid in ranks:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"rank {pid} still runs"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _rank_processes(launcher: int) -> list[int]:
    """The Python processes under the launcher (through its proxy, for MPICH's hydra)."""
    ranks, todo = [], [launcher]
    while todo:
        for child in _children(todo.pop()):
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if b"solver.cli" in command:
                ranks.append(child)
            else:
                todo.append(child)
    return sorted(ranks)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -------------------------------------------- the split step in one process, every backend


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_the_split_step_of_one_slab_equals_the_one_launch_step(
    on_backend: str, boundary: str
) -> None:
    """The decomposed solver's step (three kernels, a halo exchange, sorts on the host) on a
    single slab computes what the batched one-launch step computes, bit for bit, on every
    backend: the kernels that several processes run are those of one."""
    from solver.config import load_config
    from solver.distributed.simulation import DistributedSimulation
    from solver.distributed.world import World
    from solver.simulation import Simulation

    cfg = load_config(
        QUICK,
        [
            "particles.dp=0.06",
            "neighbors.skin=0.02",
            f"physics.boundary={boundary}",
            "neighbors.pair_halves=false",  # as several processes take them (pair_halves.py)
        ],
    )
    one, split = Simulation(cfg), DistributedSimulation(cfg, World.alone())
    assert not one._interaction.pair_halves and not split._interaction.pair_halves
    for target in (0.01, 0.04):
        while one.time < target:
            one.advance(target)
        while split.time < target:
            split.advance(target)
        assert (one.steps, one.sorts) == (split.steps, split.sorts)
        a, b = one.snapshot(), split.snapshot()
        order_a, order_b = np.argsort(a.id), np.argsort(b.id)
        for field in FIELDS:
            x, y = getattr(a, field)[order_a], getattr(b, field)[order_b]
            assert x.tobytes() == y.tobytes(), f"{field} at t = {target}"
    assert split.sorts >= 2 and split.steps > split.sorts  # steps between sorts exchanged


def test_an_existing_output_folder_ends_every_process_with_one_message(tmp_path: Path) -> None:
    """Rank 0 alone looks at the output folder; its refusal reaches every process (exit 2,
    one message, nothing written), instead of leaving the others waiting."""
    _mpiexec()
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("results\n")
    code, err = _finish(_launch(2, _run_argv(out, 0.01)), timeout=120)
    assert code == 2, err
    assert err.count("dambreak run: error:") == 1 and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_a_numerical_failure_stops_every_process_as_it_stops_one(tmp_path: Path) -> None:
    """A density band narrowed to rho_max = 1003 (the still water's floor layer holds 1002.3)
    removes the water the collapse compresses: after 0.1 s too many particles have left the
    band. The removal counts are global, so every process stops after the same step as one
    process does: exit 3, one message with the same counts, the same last good state kept by
    rank 0."""
    _mpiexec()
    failures = {}
    for processes in (1, 2):
        out = tmp_path / f"run{processes}"
        argv = _run_argv(out, 0.2, "--set=physics.rho_max=1003")
        code, err = _finish(_launch(processes, argv), 120)
        assert code == 3, err
        lines = [line for line in err.splitlines() if "numerical failure:" in line]
        assert len(lines) == 1, err
        failures[processes] = (lines[0].split("; latest")[0], read_checkpoint(out).steps)
    assert "density_out_of_band" in failures[1][0]
    assert failures[2] == failures[1]


def test_more_processes_than_cell_columns_are_refused(on_cpu: str) -> None:
    """Each slab is one cell column at least: a job wider than the grid is bad input (exit 2
    through ConfigError, before the output folder is touched)."""
    from solver.config import ConfigError, load_config
    from solver.distributed.simulation import DistributedSimulation
    from solver.distributed.world import World

    cfg = load_config(QUICK, ["particles.dp=0.08"])
    with pytest.raises(ConfigError, match="50 processes for a domain of 20 cell columns"):
        DistributedSimulation(cfg, World(None, 0, 50, 0, 1))


def test_each_process_takes_its_gpu_by_local_rank_or_its_share_of_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from solver.distributed import devices
    from solver.distributed.world import World

    third = World(None, 3, 4, 3, 4)  # local rank 3 of 4 on this machine
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("TI_VISIBLE_DEVICE", raising=False)
    monkeypatch.setattr(devices, "nvidia_gpu_count", lambda: 2)
    monkeypatch.setattr(
        devices,
        "vulkan_devices",
        lambda: [
            ("llvmpipe", "software"),
            ("A", "discrete GPU"),
            ("B", "discrete GPU"),
        ],  # fmt: skip
    )
    assert devices.share_devices(third, "cuda", None) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    devices.share_devices(third, "vulkan", None)
    assert os.environ["TI_VISIBLE_DEVICE"] == "2"  # the second hardware device, B
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the user's choice stands
    devices.share_devices(third, "cuda", None)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    monkeypatch.setattr(devices.os, "cpu_count", lambda: 16)
    assert devices.share_devices(third, "cpu", None) == 4
    assert devices.share_devices(third, "cpu", 2) == 2
