"""Tests of `dambreak render` on a tiny synthetic run: one PNG per rendered snapshot, all of one
pixel size (so they animate), an animated GIF with as many frames, every view and colouring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from solver.cli import main as dambreak
from solver.config import load_config
from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot
from solver.validation.render import run_extent
from solver.validation.run_folder import RunFolder, write_run_folder

REPO = Path(__file__).resolve().parents[1]
TIMES = (0.0, 0.1, 0.2, 0.3)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick case at dp = 0.1: a block of water sliding towards a hollow obstacle."""
    cfg = load_config(REPO / "configs" / "quick.toml", ["particles.dp=0.1"])
    dp = cfg.dp
    g = np.meshgrid(np.arange(1, 5), np.arange(1, 7), np.arange(1, 4), indexing="ij")
    fluid = np.stack([c.ravel() for c in g], axis=1) * dp
    f = np.meshgrid(np.arange(0, 17), np.arange(0, 8), [0], indexing="ij")
    floor = np.stack([c.ravel() for c in f], axis=1) * dp
    o = np.meshgrid([0.9, 1.02], [0.24, 0.36], np.arange(0, 5) * dp, indexing="ij")
    obstacle = np.stack([c.ravel() for c in o], axis=1)
    p0 = np.concatenate([fluid, floor, obstacle])
    kind = np.concatenate(
        [
            np.full(len(fluid), ParticleKind.FLUID),
            np.full(len(floor), ParticleKind.WALL),
            np.full(len(obstacle), ParticleKind.OBSTACLE),
        ]
    ).astype(np.int32)
    moving = kind == ParticleKind.FLUID
    n = len(p0)
    snapshots = []
    for step, t in enumerate(TIMES):
        v = np.zeros((n, 3))
        v[moving, 0] = 2.0 * t * p0[moving, 2] / 0.3
        p = p0 + v * t
        snapshots.append(
            Snapshot(
                t,
                step,
                p.astype(np.float32),
                v.astype(np.float32),
                np.full(n, 1000.0 + step, np.float32),
                (9810.0 * (0.3 - p[:, 2])).astype(np.float32),
                kind,
                np.arange(n, dtype=np.int32),
            )
        )
    return write_run_folder(tmp_path_factory.mktemp("render") / "run", cfg, snapshots)


def test_render_writes_frames_and_gif(tiny_run: Path, capsys: pytest.CaptureFixture) -> None:
    assert dambreak(["render", str(tiny_run)]) == 0
    frames = sorted((tiny_run / "frames").glob("frame_*.png"))
    assert [f.name for f in frames] == [f"frame_{i:05d}.png" for i in range(len(TIMES))]
    sizes = {Image.open(f).size for f in frames}
    assert len(sizes) == 1
    with Image.open(tiny_run / "frames" / "animation.gif") as gif:
        assert gif.n_frames == len(TIMES) and gif.size in sizes
    assert "animation:" in capsys.readouterr().out


def test_frame_shows_fluid_in_colour_and_boundaries_in_grey(tiny_run: Path, tmp_path: Path):
    assert dambreak(["render", str(tiny_run), "--out", str(tmp_path), "--no-gif"]) == 0
    assert not (tmp_path / "animation.gif").exists()
    rgb = np.asarray(Image.open(tmp_path / "frame_00003.png").convert("RGB")).astype(int)
    grey = (np.ptp(rgb, axis=2) < 4) & (rgb[..., 0] > 150) & (rgb[..., 0] < 235)
    coloured = np.ptp(rgb, axis=2) > 60
    assert grey.sum() > 100 and coloured.sum() > 500


@pytest.mark.parametrize(
    ("view", "color"), [("top", "pressure"), ("iso", "density"), ("side", "density")]
)
def test_views_and_colourings(tiny_run: Path, tmp_path: Path, view: str, color: str) -> None:
    args = [
        "render",
        str(tiny_run),
        "--out",
        str(tmp_path),
        "--every",
        "2",
        "--view",
        view,
        "--color",
        color,
        "--dpi",
        "50",
    ]
    assert dambreak(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "animation.gif",
        "frame_00000.png",
        "frame_00002.png",
    ]


def test_colour_range_is_fixed_over_the_run(tiny_run: Path) -> None:
    run = RunFolder.open(tiny_run)
    (lo, hi), lower, upper = run_extent(run, list(range(run.snapshot_count)), "speed")
    assert lo == 0.0 and hi == pytest.approx(2.0 * 0.3 * 3 * 0.1 / 0.3, rel=1e-5)
    assert lower[0] == pytest.approx(0.0) and upper[0] == pytest.approx(1.6, rel=1e-6)
    (lo, hi), _, _ = run_extent(run, list(range(run.snapshot_count)), "density")
    assert lo < hi


def test_not_a_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert dambreak(["render", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
