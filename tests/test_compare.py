"""Tests of `dambreak compare`: a run agrees with itself and with a copy that differs only by
rounding; a run whose fluid moves differently (faster, displaced by several dp, losing mass)
disagrees; runs of different cases or particle sets cannot be compared (exit 2).

The runs are synthetic: a small column of fluid on a floor and a back wall, moved by a simple
velocity field, written with the run's own writers into folders like `dambreak run` makes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from solver.cli import main as dambreak
from solver.config import Config, load_config
from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot
from solver.validation.compare import (
    common_times,
    config_differences,
    divergence_growth,
    particle_difference,
)
from solver.validation.metrics import back_wall_height, compute_metrics
from solver.validation.run_folder import RunFolder, RunFolderError, write_run_folder

REPO = Path(__file__).resolve().parents[1]
COLUMN = REPO / "configs" / "column_collapse.toml"
DP = 0.005715  # a / 10: a column of 10 x 4 x 20 fluid particles
TIMES = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1)


def make_config(*overrides: str) -> Config:
    """The column-collapse case, coarse and short."""
    base = ["particles.dp=0.005715", "time.end=0.1", "time.output_interval=0.02"]
    return load_config(COLUMN, [*base, *overrides])


def lattice(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """Fluid at x, y, z = dp, 2 dp, ... inside the first block; a floor and a back wall."""
    dp = cfg.dp
    block = cfg.fluid_blocks[0]
    nx, nz = round(block.size[0] / dp), round(block.size[2] / dp)
    ny = round(cfg.tank.box.size[1] / dp)
    grid = np.meshgrid(np.arange(1, nx + 1), np.arange(1, ny), np.arange(1, nz + 1), indexing="ij")
    fluid = np.stack([g.ravel() for g in grid], axis=1) * dp
    floor = np.meshgrid(np.arange(0, 3 * nx + 1), np.arange(0, ny + 1), [0], indexing="ij")
    back = np.meshgrid([0], np.arange(0, ny + 1), np.arange(1, nz + 5), indexing="ij")
    walls = (
        np.concatenate(
            [np.stack([g.ravel() for g in floor], 1), np.stack([g.ravel() for g in back], 1)]
        )
        * dp
    )
    position = np.concatenate([fluid, walls])
    kind = np.concatenate(
        [np.full(len(fluid), ParticleKind.FLUID), np.full(len(walls), ParticleKind.WALL)]
    ).astype(np.int32)
    return position, kind


def flow(
    cfg: Config,
    *,
    times: tuple[float, ...] = TIMES,
    speed_scale: float = 1.0,
    shift_dp: float = 0.0,
    noise_dp: float = 0.0,
    dtype: type = np.float32,
    seed: int = 0,
) -> list[Snapshot]:
    """Snapshots of the lattice's fluid sliding out along the floor (a shear flow).

    Rows are shuffled in every snapshot, so the comparison must match particles by id.
    """
    rng = np.random.default_rng(seed)
    p0, kind = lattice(cfg)
    ids = np.arange(len(p0), dtype=np.int32)
    fluid = kind == ParticleKind.FLUID
    height = cfg.fluid_blocks[0].size[2]
    velocity = np.zeros_like(p0)
    velocity[fluid, 0] = 0.6 * speed_scale * (1.2 - p0[fluid, 2] / height)
    velocity[fluid, 2] = -0.2 * speed_scale * p0[fluid, 2] / height
    snapshots = []
    for step, t in enumerate(times):
        position = p0 + velocity * t
        position[fluid, 0] += shift_dp * cfg.dp
        if noise_dp:
            position[fluid] += rng.normal(scale=noise_dp * cfg.dp, size=(fluid.sum(), 3))
        order = rng.permutation(len(p0))
        snapshots.append(
            Snapshot(
                time=t,
                step=100 * step,
                position=position[order].astype(dtype),
                velocity=velocity[order].astype(dtype),
                density=np.full(len(p0), 1000.0, dtype=dtype),
                pressure=(9810.0 * np.maximum(height - position[order, 2], 0.0)).astype(dtype),
                kind=kind[order],
                id=ids[order],
            )
        )
    return snapshots


def probes(scale: float = 1.0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A probe series for the config's gauge H_back."""
    t = np.linspace(0.0, 0.1, 21)
    return t, {"H_back": 0.1143 - scale * 0.3 * t}


def write(path: Path, cfg: Config, snapshots: list[Snapshot], scale: float = 1.0) -> Path:
    """A run folder with a summary like `dambreak run` writes."""
    summary = {"backend": "cpu", "device": "synthetic", "precision": cfg.physics.precision}
    return write_run_folder(path, cfg, snapshots, probes=probes(scale), summary=summary)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run, shared by the tests of this module (they never change it)."""
    cfg = make_config()
    return write(tmp_path_factory.mktemp("runs") / "cpu", cfg, flow(cfg))


def test_run_against_itself_agrees(run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    out = tmp_path / "report"
    assert dambreak(["compare", str(run_a), str(run_a), "--out", str(out)]) == 0
    for name in (
        "report.md",
        "report.json",
        "energies.png",
        "front_com.png",
        "divergence.png",
        "probes.png",
    ):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "agree" and report["failures"] == []
    assert len(report["times"]) == len(TIMES)
    assert report["divergence_growth"]["identical"]
    assert all(v == 0.0 for values in report["checks"].values() for v in values)
    assert report["probes"]["H_back"]["relative_rms"] == 0.0
    assert "AGREE" in (out / "report.md").read_text()
    assert "report:" in capsys.readouterr().out


def test_default_report_folder_is_inside_run_a(run_a: Path, tmp_path: Path) -> None:
    cfg = make_config()
    run_b = write(tmp_path / "gpu", cfg, flow(cfg, seed=1))
    assert dambreak(["compare", str(run_a), str(run_b)]) == 0
    assert (run_a / "compare_gpu" / "report.md").is_file()


def test_precision_may_differ_and_rounding_passes(run_a: Path, tmp_path: Path) -> None:
    """An f64 run whose particles differ by 1e-3 dp: particles diverge, physics agrees."""
    cfg = make_config("physics.precision=f64", "output.probe_interval=0.002")
    run_b = write(tmp_path / "f64", cfg, flow(cfg, noise_dp=1e-3, dtype=np.float64, seed=2))
    out = tmp_path / "report"
    assert dambreak(["compare", str(run_a), str(run_b), "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    rms = [p["position_rms_dp"] for p in report["particles"]]
    assert 1e-4 < rms[1] < 1e-2 and not report["divergence_growth"]["identical"]


def test_perturbed_copy_disagrees(run_a: Path, tmp_path: Path) -> None:
    """Velocities 1.5 times larger and the fluid 3 dp further along: energy, front, com fail."""
    cfg = make_config()
    run_b = write(tmp_path / "perturbed", cfg, flow(cfg, speed_scale=1.5, shift_dp=3.0), 1.5)
    out = tmp_path / "report"
    assert dambreak(["compare", str(run_a), str(run_b), "--out", str(out)]) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "disagree"
    failed = " ".join(report["failures"])
    for quantity in ("kinetic_energy", "front", "centre_of_mass", "probe H_back"):
        assert quantity in failed
    assert "mass" not in [f.split(":")[0] for f in report["failures"]]
    assert report["particles"][0]["position_rms_dp"] == pytest.approx(3.0, rel=1e-4)
    assert "DISAGREE" in (out / "report.md").read_text()


def test_a_looser_tolerance_accepts_the_difference(run_a: Path, tmp_path: Path) -> None:
    """The fluid 2.5 dp further along: front and centre of mass fail at 2 dp, pass at 3 dp."""
    cfg = make_config()
    run_b = write(tmp_path / "shifted", cfg, flow(cfg, shift_dp=2.5))
    args = ["compare", str(run_a), str(run_b), "--out", str(tmp_path / "r")]
    assert dambreak(args) == 1
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [f.split(":")[0] for f in report["failures"]] == ["centre_of_mass", "front"]
    assert report["tolerances"]["front_dp"] == 2.0
    assert dambreak([*args, "--tol-com-dp", "3", "--tol-front-dp", "3"]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["tolerances"]["front_dp"] == 3.0 and report["verdict"] == "agree"


def test_removed_particle_changes_mass(run_a: Path, tmp_path: Path) -> None:
    """One fluid particle removed in B from the third snapshot on: mass and counts differ. A
    strict mass tolerance fails the verdict on it; the default (2 %, issue 4's bound) reports
    it and lets the runs agree."""
    cfg = make_config()
    snapshots = flow(cfg)
    for k in range(2, len(snapshots)):
        s = snapshots[k]
        keep = s.id != 5
        snapshots[k] = Snapshot(
            s.time,
            s.step,
            s.position[keep],
            s.velocity[keep],
            s.density[keep],
            s.pressure[keep],
            s.kind[keep],
            s.id[keep],
        )
    run_b = write(tmp_path / "removed", cfg, snapshots)
    out = tmp_path / "report"
    strict = ["compare", str(run_a), str(run_b), "--out", str(out), "--tol-mass", "1e-6"]
    assert dambreak(strict) == 1
    report = json.loads((out / "report.json").read_text())
    assert [f.split(":")[0] for f in report["failures"]] == ["mass"]
    assert report["removed_b"] == [0, 0, 1, 1, 1, 1] and report["removed_a"] == [0] * 6
    assert dambreak(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "default")]) == 0
    assert report["particles"][2]["only_a"] == 1 and report["particles"][2]["only_b"] == 0


def test_different_dp_cannot_be_compared(
    run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = make_config("particles.dp=0.0057")
    run_b = write(tmp_path / "other_dp", cfg, flow(make_config()))
    assert dambreak(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "r")]) == 2
    assert "particles.dp" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_different_particle_sets_cannot_be_compared(
    run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = make_config()
    snapshots = flow(cfg)
    s = snapshots[0]
    keep = s.id != 7
    snapshots[0] = Snapshot(
        s.time,
        s.step,
        s.position[keep],
        s.velocity[keep],
        s.density[keep],
        s.pressure[keep],
        s.kind[keep],
        s.id[keep],
    )
    run_b = write(tmp_path / "fewer", cfg, snapshots)
    assert dambreak(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "r")]) == 2
    assert "particle sets differ" in capsys.readouterr().err


def test_unreadable_folders_exit_2(
    run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert dambreak(["compare", str(run_a), str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert dambreak(["compare", str(tmp_path / "empty"), str(run_a)]) == 2
    assert "not a run folder" in capsys.readouterr().err
    broken = tmp_path / "broken"
    write(broken, make_config(), flow(make_config(), times=(0.0,)))
    (broken / "particles_00000.vtp").unlink()
    with pytest.raises(RunFolderError, match="do not exist"):
        RunFolder.open(broken)


def test_config_differences_ignore_precision_summation_order_and_output() -> None:
    a = {
        "particles": {"dp": 0.01},
        "physics": {"precision": "f32", "gamma": 7.0},
        "neighbors": {"pair_halves": True, "skin": 0.1},
        "output": {"vtk": True},
        "fluid": [{"min": [0, 0, 0]}],
    }
    b = {
        "particles": {"dp": 0.01},
        "physics": {"precision": "f64", "gamma": 7.0},
        "neighbors": {"pair_halves": False, "cells_per_support": 3, "lists": False, "skin": 0.0},
        "output": {"vtk": False, "probe_interval": 0.1},
        "fluid": [{"min": [0, 0, 1]}],
    }
    assert config_differences(a, b) == [
        "fluid[0].min: [0, 0, 0] vs [0, 0, 1]",
        "neighbors.skin: 0.1 vs 0.0",
    ]


def test_common_times_match_within_relative_tolerance() -> None:
    a = np.array([0.0, 0.1, 0.2, 0.3])
    b = np.array([0.0, 0.1 * (1 + 1e-12), 0.25, 0.3 * (1 + 1e-6)])
    assert common_times(a, b) == [(0, 0), (1, 1)]


def test_particle_difference_matches_by_id() -> None:
    cfg = make_config()
    a = flow(cfg, seed=3)[1]
    b = flow(cfg, shift_dp=0.5, seed=4)[1]
    diff = particle_difference(a, b, cfg.dp)
    n_fluid = int(np.count_nonzero(a.kind == ParticleKind.FLUID))
    assert diff.matched == n_fluid and diff.only_a == diff.only_b == 0
    assert diff.position_rms_dp == pytest.approx(0.5, rel=1e-4)
    assert diff.position_max_dp == pytest.approx(0.5, rel=1e-4)
    assert diff.velocity_rms == pytest.approx(0.0, abs=1e-6)


def test_divergence_growth_recovers_an_exponential() -> None:
    t = np.linspace(0.0, 1.0, 101)
    growth = divergence_growth(t, 0.01 * np.exp(5.0 * t))
    assert growth["time_to_level"]["0.1"] == pytest.approx(math.log(10) / 5, rel=1e-6)
    assert growth["time_to_level"]["1"] == pytest.approx(math.log(100) / 5, rel=1e-6)
    assert growth["rate_per_s"] == pytest.approx(5.0, rel=1e-6)
    assert growth["doubling_time_s"] == pytest.approx(math.log(2) / 5, rel=1e-6)
    slow = divergence_growth(t, 0.001 * np.exp(2.0 * t))  # never reaches 0.1 dp: fitted
    assert slow["time_to_level"]["0.1"] is None
    assert slow["rate_per_s"] == pytest.approx(2.0, rel=1e-6)


def test_metrics_of_a_column_at_rest() -> None:
    """Potential energy m g sum z, centre of mass at the block's middle, front at x = a."""
    cfg = make_config()
    snap = flow(cfg, dtype=np.float64)[0]
    m = compute_metrics(snap, cfg)
    fluid = snap.kind == ParticleKind.FLUID
    n = int(np.count_nonzero(fluid))
    a, height = cfg.fluid_blocks[0].size[0], cfg.fluid_blocks[0].size[2]
    assert m.fluid_count == n and m.mass == pytest.approx(n * cfg.particle_mass)
    assert m.front == pytest.approx(a)
    assert m.centre_of_mass[2] == pytest.approx((height + cfg.dp) / 2)
    assert m.potential_energy == pytest.approx(
        cfg.particle_mass * 9.81 * np.sum(snap.position[fluid, 2])
    )
    assert m.kinetic_energy == pytest.approx(
        0.5 * cfg.particle_mass * np.sum(snap.velocity[fluid] ** 2)
    )
    assert back_wall_height(snap.position[fluid], 0.0, 0.0, cfg.dp) == pytest.approx(height)
