"""`dambreak render RUN`: pictures of a run without ParaView.

One PNG frame per snapshot (or every K-th): fluid particles coloured by speed (or pressure, or
density) with a colour bar and the simulated time, wall and obstacle particles in light grey,
seen from the side (x-z, looking along +y), from the top (x-y) or in perspective (iso). All
frames share the axis limits (the particles' extent over the rendered snapshots), an equal
scale on every axis and one colour range, so the frames can be compared and animated. The
frames are then joined into an animated GIF with Pillow (which comes with matplotlib).

In the 2D views particles nearer the viewer are drawn last, over those behind; boundaries are
drawn first, under the fluid, so the tank appears as a grey background and never hides water.
matplotlib runs on the Agg backend (files only, no display needed).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot
from solver.validation.run_folder import RunFolder, RunFolderError

__all__ = [
    "COLOR_FIELDS",
    "VIEWS",
    "FrameStyle",
    "add_arguments",
    "colour_values",
    "main",
    "render_frame",
    "render_run",
    "run_extent",
    "write_gif",
]

VIEWS: tuple[str, ...] = ("side", "top", "iso")
COLOR_FIELDS: dict[str, str] = {
    "speed": "speed [m/s]",
    "pressure": "pressure [Pa]",
    "density": "density [kg/m^3]",
}
#: Per-snapshot percentiles bounding the colour range of pressure and density, whose spikes
#: (a few particles at an impact) would otherwise wash out the picture.
ROBUST_PERCENTILES = (0.5, 99.5)
WALL_GREY = "0.85"
OBSTACLE_GREY = "0.72"

#: (horizontal axis, vertical axis, depth axis, nearest first is larger depth?) per 2D view.
_PLANES: dict[str, tuple[int, int, int, bool]] = {
    "side": (0, 2, 1, False),  # looking along +y: small y is nearest
    "top": (0, 1, 2, True),  # looking down: large z is nearest
}


@dataclass(frozen=True)
class FrameStyle:
    """What every frame of a run shares: view, colouring, limits and size."""

    view: str
    color: str
    vmin: float
    vmax: float
    lower: tuple[float, float, float]
    upper: tuple[float, float, float]
    dp: float
    cmap: str = "viridis"
    width_in: float = 8.0
    dpi: int = 100
    title: str = ""


def colour_values(snap: Snapshot, field: str) -> np.ndarray:
    """The colouring field (speed, pressure or density) of every particle of `snap`."""
    if field == "speed":
        v = np.asarray(snap.velocity, dtype=np.float64)
        return np.sqrt(np.sum(v * v, axis=1))
    if field == "pressure":
        return np.asarray(snap.pressure, dtype=np.float64)
    if field == "density":
        return np.asarray(snap.density, dtype=np.float64)
    raise ValueError(f"unknown colour field {field!r}; choose from {', '.join(COLOR_FIELDS)}")


def run_extent(
    run: RunFolder, indices: list[int], field: str
) -> tuple[tuple[float, float], np.ndarray, np.ndarray]:
    """Colour range of the fluid and the bounding box of all particles over the snapshots.

    Speed runs from 0 to the largest speed; pressure and density from the lowest 0.5th to the
    highest 99.5th percentile of any snapshot. A range of zero width is widened to show.
    """
    lo, hi = math.inf, -math.inf
    lower = np.full(3, math.inf)
    upper = np.full(3, -math.inf)
    for index in indices:
        snap = run.snapshot(index)
        if snap.count:
            position = np.asarray(snap.position, dtype=np.float64)
            lower = np.minimum(lower, position.min(axis=0))
            upper = np.maximum(upper, position.max(axis=0))
        values = colour_values(snap, field)[np.asarray(snap.kind) == int(ParticleKind.FLUID)]
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        if field == "speed":
            lo, hi = 0.0, max(hi, float(values.max()))
        else:
            p_lo, p_hi = np.percentile(values, ROBUST_PERCENTILES)
            lo, hi = min(lo, float(p_lo)), max(hi, float(p_hi))
    if not np.all(np.isfinite(lower)):
        lower, upper = np.zeros(3), np.ones(3)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        pad = max(abs(hi), 1.0) * 1e-3 if field != "speed" else 1e-3
        lo, hi = (lo - pad, hi + pad) if field != "speed" else (0.0, hi + pad)
    return (lo, hi), lower, upper


def _figure_size(style: FrameStyle) -> tuple[float, float]:
    """Figure size (inches) fitting the view's aspect ratio, colour bar and title included."""
    span = np.subtract(style.upper, style.lower)
    if style.view == "iso":
        return style.width_in, style.width_in * 0.75
    h, v, _, _ = _PLANES[style.view]
    ratio = span[v] / span[h] if span[h] > 0 else 1.0
    height = min(max(style.width_in * 0.8 * ratio + 1.0, 2.5), 1.2 * style.width_in)
    return style.width_in, height


def render_frame(snap: Snapshot, path: Path, style: FrameStyle) -> Path:
    """Draw one snapshot into the PNG `path` (same pixel size for every frame of a style)."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from solver.validation.plots import pyplot

    plt = pyplot()
    kind = np.asarray(snap.kind)
    position = np.asarray(snap.position, dtype=np.float64)
    fluid = kind == int(ParticleKind.FLUID)
    walls = kind == int(ParticleKind.WALL)
    obstacles = kind == int(ParticleKind.OBSTACLE)
    values = colour_values(snap, style.color)
    norm = Normalize(vmin=style.vmin, vmax=style.vmax)
    margin = 2.0 * style.dp
    lower = np.asarray(style.lower) - margin
    upper = np.asarray(style.upper) + margin

    fig = plt.figure(figsize=_figure_size(style), dpi=style.dpi, layout="constrained")
    if style.view == "iso":
        ax = fig.add_subplot(projection="3d")
        # The 3D box spans about 60 % of the figure width along its longest edge.
        points_per_m = 0.6 * style.width_in * 72.0 / max(float(np.max(upper - lower)), 1e-12)
        size = max(0.3, (style.dp * points_per_m) ** 2)
        for mask, colour, alpha in ((walls, WALL_GREY, 0.15), (obstacles, OBSTACLE_GREY, 0.5)):
            if np.any(mask):
                p = position[mask]
                ax.scatter(
                    p[:, 0],
                    p[:, 1],
                    p[:, 2],
                    s=size,
                    c=colour,
                    alpha=alpha,
                    linewidths=0,
                    depthshade=False,
                )
        p = position[fluid]
        ax.scatter(
            p[:, 0],
            p[:, 1],
            p[:, 2],
            s=size,
            c=values[fluid],
            cmap=style.cmap,
            norm=norm,
            linewidths=0,
            depthshade=False,
        )
        ax.set_xlim(lower[0], upper[0])
        ax.set_ylim(lower[1], upper[1])
        ax.set_zlim(lower[2], upper[2])
        ax.set_box_aspect(tuple(upper - lower))
        ax.view_init(elev=25.0, azim=-60.0)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.set_zlabel("z [m]")
    else:
        h, v, depth, near_is_high = _PLANES[style.view]
        ax = fig.add_subplot()
        ax.set_xlim(lower[h], upper[h])
        ax.set_ylim(lower[v], upper[v])
        ax.set_aspect("equal")
        width, _ = _figure_size(style)
        points_per_m = 0.8 * width * 72.0 / (upper[h] - lower[h])
        size = max(0.3, (style.dp * points_per_m) ** 2)
        for mask, colour in ((walls, WALL_GREY), (obstacles, OBSTACLE_GREY)):
            if np.any(mask):
                ax.scatter(
                    position[mask, h], position[mask, v], s=size, c=colour, linewidths=0, zorder=1
                )
        p = position[fluid]
        c = values[fluid]
        order = np.argsort(p[:, depth] if near_is_high else -p[:, depth], kind="stable")
        ax.scatter(
            p[order, h],
            p[order, v],
            s=size,
            c=c[order],
            cmap=style.cmap,
            norm=norm,
            linewidths=0,
            zorder=2,
        )
        names = "xyz"
        ax.set_xlabel(f"{names[h]} [m]")
        ax.set_ylabel(f"{names[v]} [m]")
    fig.colorbar(
        ScalarMappable(norm=norm, cmap=style.cmap),
        ax=ax,
        label=COLOR_FIELDS[style.color],
        shrink=0.8,
    )
    title = f"t = {snap.time:.3f} s"
    ax.set_title(f"{style.title}   {title}" if style.title else title, fontsize=10)
    fig.savefig(path, dpi=style.dpi)
    plt.close(fig)
    return Path(path)


def write_gif(frames: list[Path], path: Path, fps: float = 10.0) -> Path:
    """Join PNG frames into an animated GIF at `path` that loops forever."""
    from PIL import Image

    images = [Image.open(frame).convert("RGB") for frame in frames]
    size = images[0].size
    images = [im if im.size == size else im.resize(size) for im in images]
    paletted = [im.quantize(colors=255) for im in images]
    paletted[0].save(
        path,
        save_all=True,
        append_images=paletted[1:],
        duration=max(20, int(round(1000.0 / fps))),
        loop=0,
        optimize=False,
    )
    for image in images:
        image.close()
    return Path(path)


def render_run(
    run: RunFolder,
    out_dir: Path,
    *,
    every: int = 1,
    view: str = "side",
    color: str = "speed",
    gif: bool = True,
    fps: float = 10.0,
    dpi: int = 100,
) -> dict[str, Any]:
    """Render every `every`-th snapshot of `run` into `out_dir`; returns frames and GIF path."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    if run.snapshot_count == 0:
        raise RunFolderError(f"{run.path}: the run has no snapshots to render")
    indices = list(range(0, run.snapshot_count, max(1, int(every))))
    (vmin, vmax), lower, upper = run_extent(run, indices, color)
    style = FrameStyle(
        view=view,
        color=color,
        vmin=vmin,
        vmax=vmax,
        lower=(float(lower[0]), float(lower[1]), float(lower[2])),
        upper=(float(upper[0]), float(upper[1]), float(upper[2])),
        dp=run.config.dp,
        dpi=dpi,
        title=run.config.name,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    progress = sys.stdout.isatty()
    for number, index in enumerate(indices):
        frames.append(render_frame(run.snapshot(index), out_dir / f"frame_{index:05d}.png", style))
        if progress:
            print(f"\rrendered {number + 1}/{len(indices)} frames", end="", flush=True)
    if progress:
        print()
    animation = write_gif(frames, out_dir / "animation.gif", fps) if gif else None
    return {"frames": frames, "gif": animation, "colour_range": (vmin, vmax)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `dambreak render`."""
    parser.add_argument("run", metavar="RUN", help="run folder")
    parser.add_argument("--out", help="frame folder (default RUN/frames)")
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="K",
        help="render every K-th snapshot (default 1: all)",
    )
    parser.add_argument(
        "--view",
        choices=VIEWS,
        default="side",
        help="side (x-z), top (x-y) or iso (perspective) (default side)",
    )
    parser.add_argument(
        "--color",
        choices=tuple(COLOR_FIELDS),
        default="speed",
        help="colour the fluid by this field (default speed)",
    )
    parser.add_argument(
        "--no-gif",
        dest="gif",
        action="store_false",
        help="write the PNG frames only, no animated GIF",
    )
    parser.add_argument("--fps", type=float, default=10.0, help="GIF frames per second")
    parser.add_argument("--dpi", type=int, default=100, help="frame resolution (default 100)")


def main(args: argparse.Namespace) -> int:
    """Run `dambreak render`; 0 on success, 2 if the run cannot be read."""
    if args.every < 1:
        print("dambreak render: --every must be at least 1", file=sys.stderr)
        return 2
    try:
        run = RunFolder.open(args.run)
        out_dir = Path(args.out) if args.out else run.path / "frames"
        result = render_run(
            run,
            out_dir,
            every=args.every,
            view=args.view,
            color=args.color,
            gif=args.gif,
            fps=args.fps,
            dpi=args.dpi,
        )
    except RunFolderError as exc:
        print(f"dambreak render: {exc}", file=sys.stderr)
        return 2
    lo, hi = result["colour_range"]
    print(f"{len(result['frames'])} frames in {out_dir} ({args.color} from {lo:.4g} to {hi:.4g})")
    if result["gif"] is not None:
        print(f"animation: {result['gif']}")
    return 0
