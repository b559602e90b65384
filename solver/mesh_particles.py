"""Particles of surface meshes: a closed solid filled, a terrain layered below, water inside.

DualSPHysics' GenCase fills a solid drawn from an STL by voxelising it on the particle lattice
(Dominguez et al. 2022, Comput. Part. Mech. 9, 867-895); here the same is done with an exact
inside test and exact distances instead of voxels: the lattice points are kept that lie inside
the surface (solver/surface_crossings.py: the parity of an upward ray's crossings) and, for a
shell or a terrain, no deeper below it than the boundary's thickness (the distance to the
nearest triangle, solver/surface_distance.py).

The lattice is the one of the box rules of solver/scene.py: points lower + (k + gap) dp on each
axis, gap = surface_gap of the boundary method (1/2 under mDBC, so that layer k lies
(k + 1/2) dp behind a face parallel to the lattice, as on the walls), `lower` the corner of the
mesh's bounding box for an obstacle (the box rule anchors its lattice at the box's min corner)
and the tank's min corner for a terrain (whose particles so stand in the fluid's columns). A
mesh of a box whose sides are multiples of dp so gives the box's particles (the box rule also
puts a layer on a max face that is not a whole number of dp away; a mesh keeps the regular
lattice).

Which points: depth is counted positive inside the solid (below a terrain). A solid keeps every
point inside; a shell or a terrain the points whose depth lies in [(gap - 1/2) dp,
(gap + layers - 1/2) dp): `layers` layers behind a face parallel to the lattice, and a band
`layers` dp thick holds a point on every lattice line along the axis nearest to the surface's
normal, so a slanted or curved surface has no holes. So under DBC, whose outermost layer
samples the surface itself, points less than dp/2 outside belong to it too (solver/scene.py
keeps the fluid dp/2 from them); under mDBC a point may lie on a slanted face, and is then its
own ghost node. Points within ON_SURFACE dp of the surface count as on it. Fluid is kept
outside and at least dp/2 from every surface.

Water filling a closed mesh (a `[[fluid]] mesh`) takes the fluid lattice points strictly inside
it: an odd number of crossings above and more than ON_SURFACE dp from the surface, so a point
on a face (where float32 STL rounding decides the parity) is never water.
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
    "strictly_inside",
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
    """lower + (k + gap) dp for k = 0, 1, ... while <= upper + (1/2 - gap) dp, the farthest a
    band point can lie outside (within ON_SURFACE dp + tol)."""
    count = math.floor((upper + (0.5 - gap) * dp - lower - gap * dp + tol) / dp + ON_SURFACE) + 1
    return lower + dp * (np.arange(max(count, 0)) + gap)


def tank_axis(lo: float, hi: float, dp: float, gap: float, tol: float) -> np.ndarray:
    """The fluid lattice lo + (i + gap) dp across a whole tank axis [lo, hi], dp/2 clear of it."""
    index = fluid_index_range(lo, hi, lo, hi, dp, tol, gap)
    return lo + dp * (np.arange(index.start, index.stop) + gap)


def _product(xs: np.ndarray, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """All points (x, y, z) of the three axes' coordinates, x varying slowest."""
    grid = np.meshgrid(xs, ys, zs, indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1)


def _band(
    inside: np.ndarray, distance: np.ndarray, dp: float, gap: float, layers: int, hollow: bool
) -> np.ndarray:
    """Mask of the points a boundary keeps: depth in [(gap - 1/2) dp, (gap + layers - 1/2) dp),
    the depth counted positive inside the solid (below a terrain); no lower bound if solid."""
    keep = distance <= ON_SURFACE * dp  # on the surface, whatever the ray parity says
    keep |= ~inside & (distance < (0.5 - gap - ON_SURFACE) * dp)
    if hollow:
        keep |= inside & (distance < (gap + layers - 0.5 - ON_SURFACE) * dp)
    else:
        keep |= inside
    return keep


def _band_reach(dp: float, gap: float, layers: int, hollow: bool) -> float:
    """How far from the surface `_band` needs distances."""
    return max(gap + layers - 0.5 if hollow else 0.0, 0.5 - gap, ON_SURFACE) * dp


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
    reach = _band_reach(dp, gap, layers, hollow)
    distance = nearest_on_surface(points, triangles, dp, reach=reach).distance
    return points[_band(inside, distance, dp, gap, layers, hollow)]


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


def strictly_inside(
    points: np.ndarray, triangles: np.ndarray, origin: np.ndarray, dp: float
) -> np.ndarray:
    """Mask of `points` (on columns origin + (i, j) dp) inside a closed surface and more than
    ON_SURFACE dp from it."""
    inside = crossings_above(points, triangles, origin, dp) % 2 == 1
    margin = ON_SURFACE * dp
    near = nearest_on_surface(points[inside], triangles, dp, reach=margin).distance
    keep = np.zeros(len(points), dtype=bool)
    keep[np.flatnonzero(inside)] = near > margin
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
    """Lattice points (xs x ys x zs) of a height-field terrain's band (below it)."""
    reach = _band_reach(dp, gap, layers, True)
    zs = zs[
        (zs >= triangles[:, :, 2].min() - reach - tol) & (zs <= triangles[:, :, 2].max() + reach)
    ]
    points = _product(xs, ys, zs)
    if len(points) == 0:
        return points
    below = crossings_above(points, triangles, np.array([xs[0], ys[0]]), dp) == 1
    distance = nearest_on_surface(points, triangles, dp, reach=reach).distance
    return points[_band(below, distance, dp, gap, layers, True)]


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
