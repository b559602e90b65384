"""`dambreak bench`: a short benchmark on the CPU reports consistent figures."""

import json

import pytest

from solver.bench import dp_for_particles
from solver.cli import main
from solver.config import load_config
from solver.neighbor_lists import LIST_SKIN, NeighbourLists
from solver.scene import build_scene


def test_dp_for_particles_gives_about_that_many() -> None:
    cfg = load_config("configs/quick.toml")
    for target in (3_000, 40_000):
        dp = dp_for_particles(cfg, target)
        cfg_n = load_config("configs/quick.toml", [f"particles.dp={dp!r}"])
        count = len(build_scene(cfg_n).kind)
        assert 0.9 * target <= count <= target


def test_bench_json_is_consistent(on_cpu: str, capsys: pytest.CaptureFixture) -> None:
    status = main(["bench", "configs/quick.toml", "--backend", "cpu", "--dp", "0.08",
                   "--steps", "6", "--warmup", "2", "--phase-steps", "2", "--json"])  # fmt: skip
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    cfg = load_config("configs/quick.toml", ["particles.dp=0.08"])
    assert result["particles"] == len(build_scene(cfg).kind)
    assert result["steps"] == 6 and result["backend"] == "cpu"
    assert result["particle_steps_per_second"] == pytest.approx(
        result["particles"] * 6 / result["wall_s"], rel=0.01
    )
    assert result["neighbour_interactions_per_second"] == pytest.approx(
        result["particle_steps_per_second"] * result["neighbours_per_particle"]
    )
    assert 10 < result["neighbours_per_particle"] < 200
    # quick.toml has mDBC walls: their density pass is a phase of its own
    assert set(result["phase_ms_per_step"]) == {
        "neighbour sort",
        "boundary density",
        "interaction",
        "integration",
    }
    assert result["simulated_time"] > 0 and result["compile_s"] > 0
    # the CPU's neighbour lists come on top of the arrays, up to their bound
    lists = NeighbourLists.nbytes_bound(cfg, result["particles"], LIST_SKIN) / result["particles"]
    assert 100 < result["device_bytes_per_particle"] - lists < 400


def test_bench_rejects_bad_sizes(capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "configs/quick.toml", "--backend", "cpu", "--particles", "0"]) == 2
    assert "--particles" in capsys.readouterr().err
