"""Boundary particles of surface meshes: a closed solid filled, or a terrain layered below.

DualSPHysics' GenCase fills a solid drawn from an STL by voxelising it on the particle lattice
(Dominguez et al. 2022, Comput. Part. Mech. 9, 867-895, section 3); here the same is done with
an exact inside test and exact distances instead of voxels: the lattice points are kept that
lie inside the surface (solver/surface_crossings.py: the parity of an upward ray's crossings)
and, for a shell or a terrain, no deeper below it than the boundary's thickness (the distance
to the nearest triangle, solver/surface_distance.py).

The lattice is the one the box rules of solver/scene.py use, so a mesh of a box gives the box's
particles: points lower + (k + gap) dp on each axis, `lower` the corner of the mesh's bounding
box for an obstacle (the box path anchors its lattice at the box's min corner) and the tank's
min corner for a terrain (whose particles so stand in the fluid's columns), gap = surface_gap
of the boundary method (1/2 under mDBC: layer k lies (k + 1/2) dp behind a face parallel to
the lattice, as on the walls). A point belongs to the solid when it is inside or within
ON_SURFACE dp of the surface (DBC puts its outermost layer on the surface); a shell or terrain
keeps the points less than (gap + layers - 1/2) dp deep, `layers` layers behind a face parallel
to the lattice. Fluid is kept outside and at least dp/2 from every surface.
"""

from __future__ import annotations

import math

import numpy as np

from solver.lattice import fluid_index_range
from solver.surface_crossings import crossings_above
from solver.surface_distance import nearest_on_surface

__all__ = [
    "ON_SURFACE",
    "clear_of_surface",
    "far_from",
    "lattice_axis",
    "solid_points",
    "tank_axis",
    "terrain_columns",
    "terrain_points",
]

ON_SURFACE = 1e-4
"""Points this close to the surface (in dp) count as on it, whatever the ray parity says.

Binary STL stores float32 coordinates (7 significant digits), so a face meant to lie at 0.35
lies at 0.34999999: comparisons with a mesh allow this much, far above that rounding at the
sizes of a case (and far above the rays' offset, solver/surface_crossings.py)."""


def lattice_axis(lower: float, upper: float, dp: float, gap: float, tol: float) -> np.ndarray:
    """lower + (k + gap) dp for k = 0, 1, ... while <= upper (within ON_SURFACE dp + tol)."""
    count = math.floor((upper - lower - gap * dp + tol) / dp + ON_SURFACE) + 1
    return lower + dp * (np.arange(max(count, 0)) + gap)


def tank_axis(lo: float, hi: float, dp: float, gap: float, tol: float) -> np.ndarray:
    """The fluid lattice lo + (i + gap) dp across a whole tank axis [lo, hi], dp/2 clear of it."""
    index = fluid_index_range(lo, hi, lo, hi, dp, tol, gap)
    return lo + dp * (np.arange(index.start, index.stop) + gap)


def _product(xs: np.ndarray, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """All points (x, y, z) of the three axes' coordinates, x varying slowest."""
    grid = np.meshgrid(xs, ys, zs, indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1)


def _band_depth(gap: float, layers: int) -> float:
    """Depth (in dp) below which a shell or terrain keeps no point: (gap + layers - 1/2)."""
    return gap + layers - 0.5


def solid_points(
    triangles: np.ndarray, dp: float, gap: float, hollow: bool, layers: int, tol: float
) -> np.ndarray:
    """Lattice points of a closed surface's solid: all of them, or `layers` deep if hollow."""
    lower = triangles.reshape(-1, 3).min(axis=0)
    upper = triangles.reshape(-1, 3).max(axis=0)
    axes = [lattice_axis(lower[a], upper[a], dp, gap, tol) for a in range(3)]
    points = _product(*axes)
    if len(points) == 0:
        return points
    origin = np.array([axes[0][0], axes[1][0]])
    inside = crossings_above(points, triangles, origin, dp) % 2 == 1
    reach = _band_depth(gap, layers) * dp if hollow else ON_SURFACE * dp
    depth = nearest_on_surface(points, triangles, dp, reach=reach).distance
    keep = inside | (depth <= ON_SURFACE * dp)
    if hollow:
        keep &= depth < (_band_depth(gap, layers) - ON_SURFACE) * dp
    return points[keep]


def clear_of_surface(
    points: np.ndarray,
    triangles: np.ndarray,
    origin: np.ndarray,
    dp: float,
    clearance: float,
    closed: bool,
) -> np.ndarray:
    """Mask of `points` (on columns origin + (i, j) dp) outside the surface, `clearance` from it
    (less ON_SURFACE dp).

    Outside a closed surface means an even number of crossings above; above an open terrain,
    none.
    """
    crossings = crossings_above(points, triangles, origin, dp)
    outside = crossings % 2 == 0 if closed else crossings == 0
    clearance -= ON_SURFACE * dp
    near = nearest_on_surface(points[outside], triangles, dp, reach=clearance).distance
    keep = np.zeros(len(points), dtype=bool)
    keep[np.flatnonzero(outside)] = near >= clearance
    return keep


def terrain_columns(triangles: np.ndarray, xs: np.ndarray, ys: np.ndarray, dp: float) -> np.ndarray:
    """(len(xs) * len(ys),) how often each column (x, y) of the tank crosses the terrain."""
    columns = _product(xs, ys, np.array([-np.inf]))
    return crossings_above(columns, triangles, np.array([xs[0], ys[0]]), dp)


def terrain_points(
    triangles: np.ndarray,
    xs: np.ndarray,
    ys: np.ndarray,
    zs: np.ndarray,
    dp: float,
    gap: float,
    layers: int,
    tol: float,
) -> np.ndarray:
    """Lattice points (xs x ys x zs) below a height-field terrain, less than the band deep."""
    lowest = triangles[:, :, 2].min() - _band_depth(gap, layers) * dp
    zs = zs[(zs >= lowest - tol) & (zs <= triangles[:, :, 2].max() + ON_SURFACE * dp)]
    points = _product(xs, ys, zs)
    if len(points) == 0:
        return points
    below = crossings_above(points, triangles, np.array([xs[0], ys[0]]), dp) == 1
    depth = nearest_on_surface(points, triangles, dp, reach=_band_depth(gap, layers) * dp).distance
    band = (_band_depth(gap, layers) - ON_SURFACE) * dp
    keep = (below | (depth <= ON_SURFACE * dp)) & (depth < band)
    return points[keep]


def far_from(points: np.ndarray, placed: np.ndarray, radius: float) -> np.ndarray:
    """Mask of `points` with no point of `placed` closer than `radius` (cell-list search)."""
    keep = np.ones(len(points), dtype=bool)
    if len(points) == 0 or len(placed) == 0:
        return keep
    origin = np.minimum(points.min(axis=0), placed.min(axis=0))
    cells = np.floor((placed - origin) / radius).astype(np.int64)
    span = cells.max(axis=0) + 3
    key = ((cells[:, 0] + 1) * span[1] + cells[:, 1] + 1) * span[2] + cells[:, 2] + 1
    order = np.argsort(key, kind="stable")
    key, placed = key[order], placed[order]
    mine = np.floor((points - origin) / radius).astype(np.int64) + 1
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                cell = mine + np.array([dx, dy, dz])
                valid = np.all(cell < span, axis=1)  # beyond every placed cell: nothing there
                other = (cell[:, 0] * span[1] + cell[:, 1]) * span[2] + cell[:, 2]
                lo = np.searchsorted(key, other, "left")
                hi = np.searchsorted(key, other, "right")
                count = np.where(valid, hi - lo, 0)
                for j in range(int(count.max(initial=0))):
                    src = np.flatnonzero(count > j)
                    d = np.linalg.norm(points[src] - placed[lo[src] + j], axis=1)
                    keep[src[d < radius]] = False
    return keep
