"""The memory check: the estimate counts what the solver really allocates, is computed from
the config alone (no scene built), and a run that cannot fit is refused with the figures."""

from __future__ import annotations

from pathlib import Path

import conftest
import numpy as np
import pytest
import taichi as ti

from solver import memory
from solver.backend import BackendInfo
from solver.cli import main
from solver.config import Config, load_config
from solver.memory import InsufficientMemoryError, check_memory, estimate
from solver.neighbor_lists import NeighbourLists
from solver.neighbors import GPU_CELLS_PER_SUPPORT, GPU_X_REFINEMENT
from solver.particles import LAYOUT, ParticleArrays
from solver.scene import build_scene
from solver.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]
STILL_WATER = ROOT / "tests" / "data" / "still_water.toml"
QUICK = ROOT / "configs" / "quick.toml"


def device_arrays(root: object) -> list[ti.Ndarray]:
    """Every Taichi ndarray reachable from `root` through solver objects, each once."""
    found: dict[int, ti.Ndarray] = {}
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, ti.Ndarray):
            found[id(obj)] = obj
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif type(obj).__module__.startswith("solver."):
            todo.extend(vars(obj).values())
    return list(found.values())


def allocated_bytes(root: object) -> int:
    """Sum of the bytes of every device array reachable from `root`."""
    return sum(np.asarray(a.to_numpy()).nbytes for a in device_arrays(root))


def cpu_info() -> BackendInfo:
    """A BackendInfo for the CPU, without starting anything."""
    return BackendInfo("cpu", "test CPU", "f32", None, "1.7.4")


@pytest.mark.parametrize(
    ("real_bytes", "symplectic", "sps", "expected"),
    [(4, False, False, 104), (4, True, False, 116), (8, False, False, 192), (4, False, True, 152)],
)
def test_bytes_per_particle_follow_the_layout(
    real_bytes: int, symplectic: bool, sps: bool, expected: int
) -> None:
    # 9 state arrays (15 reals, 2 ints), 3 work arrays (4 reals, 1 int), the reorder's scratch
    # (3 reals, 1 int), the symplectic scheme's position_prev (3 reals), and the SPS closure's
    # stress tau / rho^2 with its second copy tau_next (6 reals x 2): the default is 104 bytes
    # (f32) and laminar_sps adds exactly 48
    got = ParticleArrays.nbytes(1, real_bytes, keep_position_prev=symplectic, keep_sps_stress=sps)
    assert got == expected
    assert set(LAYOUT) >= {"position", "velocity", "density", "removed", "position_prev", "tau"}


@pytest.mark.parametrize(
    ("integrator", "viscosity"),
    [("verlet", "artificial"), ("symplectic", "artificial"), ("verlet", "laminar_sps")],
)
def test_estimate_matches_what_a_simulation_allocates(
    on_cpu: str, integrator: str, viscosity: str
) -> None:
    overrides = [f"time.integrator={integrator}", f"physics.viscosity={viscosity}"]
    # the estimate's grid is the GPUs' finer one, an upper bound of the CPU's: the simulation
    # here takes it too, so that the grid's arrays count exactly
    gpu_grid = [
        f"neighbors.cells_per_support={GPU_CELLS_PER_SUPPORT}",
        f"neighbors.x_refinement={GPU_X_REFINEMENT}",
    ]
    cfg = load_config(STILL_WATER, overrides + gpu_grid)
    assert estimate(load_config(STILL_WATER, overrides)) == estimate(cfg)
    sim = Simulation(cfg)
    need = estimate(cfg)
    assert need.particles == len(sim.scene)  # no obstacle: the lattice count is exact
    particles = ParticleArrays.nbytes(
        need.particles,
        4,
        keep_position_prev=integrator == "symplectic",
        keep_sps_stress=viscosity == "laminar_sps",
    )
    assert allocated_bytes(sim.particles) == particles
    sim.ensure_sorted()  # the first sort widens the neighbour lists' rows to their length
    lists = allocated_bytes(sim._lists) if sim._lists is not None else 0
    actual = allocated_bytes(sim) - lists
    # on the CPU with the artificial viscosity the pair halves' sums too, counted exactly, and
    # the neighbour lists they read, within the bound
    halves = allocated_bytes(sim._pair_sums)
    assert (halves > 0) == (viscosity == "artificial") == (lists > 0)
    if lists:
        bound = NeighbourLists.nbytes_bound(cfg, need.particles, sim.skin)
        assert 0.5 * bound < lists <= bound
        assert need.cpu_bytes == halves + bound
    else:
        assert need.cpu_bytes == 0
    device = need.device_bytes_on("cpu") - need.cpu_bytes + halves
    assert abs(device - actual) <= 0.2 * actual, (device, actual)
    sim.keep()  # a run keeps its last good state on the device from the start
    kept = allocated_bytes(sim) - lists - actual
    assert need.kept_bytes == kept


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_particle_bound_of_the_quick_case_is_close(on_cpu: str, boundary: str) -> None:
    # exact under mDBC; under DBC an obstacle standing on the floor loses its points on the
    # floor, which the bound counts
    cfg = load_config(QUICK, [f"physics.boundary={boundary}"])
    need = estimate(cfg)
    built = len(build_scene(cfg))
    assert built <= need.particles <= 1.05 * built
    if boundary == "mdbc":
        assert need.particles == built


def test_a_run_that_cannot_fit_is_refused_with_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda backend: 1_000_000)
    try:
        code = main(["run", str(STILL_WATER), "--backend", "cpu", "--out", str(tmp_path / "o")])
    finally:
        conftest._current = None
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    need = estimate(load_config(STILL_WATER))
    needed = memory._size(need.bytes_on("cpu") + need.kept_bytes)  # both in RAM on the CPU
    assert f"the run needs about {needed} of RAM" in err
    assert "has 976.6 KiB available" in err
    assert "use a larger particles.dp (now 0.01)" in err
    assert not (tmp_path / "o" / "config.toml").exists()


def test_huge_case_is_estimated_without_building_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg: Config = load_config(QUICK, ["particles.dp=0.001"])
    need = estimate(cfg)  # about 8e7 particles: counted, never placed
    assert 5e7 < need.particles < 1.2e8
    # the particle arrays with the reorder's scratch, the grid's four arrays a particle and its
    # cell offsets (two keys a cell)
    at_least = need.particles * (ParticleArrays.nbytes(1, 4) + 16) + 4 * 2 * need.cells
    assert need.bytes_on("cuda") > at_least
    monkeypatch.setattr(memory, "available_bytes", lambda backend: 8 * 2**30)
    gpu = BackendInfo("cuda", "Test GPU", "f32", None, "1.7.4")
    with pytest.raises(InsufficientMemoryError) as err:
        check_memory(cfg, gpu)
    message = str(err.value)
    assert message.startswith(f"{QUICK}: the run needs about ")
    assert "GiB of device memory" in message
    assert f"({need.particles:,} particles" in message
    assert "Test GPU has 8.0 GiB available" in message


def test_counts_beyond_32_bit_indices_are_refused() -> None:
    cfg = load_config(QUICK, ["particles.dp=0.00002"])
    limits = r"at most 2,147,483,646 particles and 1,073,741,822 cells fit 32-bit indices"
    with pytest.raises(InsufficientMemoryError, match=limits):
        check_memory(cfg, cpu_info())


def test_unknown_free_memory_is_said_and_not_checked(capsys: pytest.CaptureFixture[str]) -> None:
    vulkan = BackendInfo("vulkan", "lavapipe", "f32", None, "1.7.4")
    assert memory.available_bytes("vulkan") is None
    check_memory(load_config(STILL_WATER), vulkan)
    assert "free memory of vulkan is not known here" in capsys.readouterr().err


def test_available_ram_is_read() -> None:
    free = memory.available_bytes("cpu")
    assert free is not None and free > 0


def test_the_last_good_state_goes_to_the_host_where_the_device_has_no_room(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU with room for the simulation but not for the copy of its state kept beside it:
    the run goes on with the copy on the host, and says so; with room for both, on the
    device, silently; the CPU keeps both in the same RAM and needs room for both."""
    cfg = load_config(STILL_WATER)
    need = estimate(cfg)
    gpu = BackendInfo("cuda", "Test GPU", "f32", None, "1.7.4")
    between = need.bytes_on("cuda") + need.kept_bytes // 2
    monkeypatch.setattr(memory, "available_bytes", lambda backend: between)
    assert check_memory(cfg, gpu) is False
    assert "the state is kept on the host" in capsys.readouterr().err
    with pytest.raises(InsufficientMemoryError):
        check_memory(cfg, cpu_info())
    room = need.bytes_on("cpu") + need.kept_bytes
    monkeypatch.setattr(memory, "available_bytes", lambda backend: room)
    assert check_memory(cfg, gpu) is True
    assert check_memory(cfg, cpu_info()) is True
    assert capsys.readouterr().err == ""
