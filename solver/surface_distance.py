"""Distance from points to a triangle surface, and the nearest surface points (numpy only).

The closest point of a triangle to a point is found by the Voronoi-region test of Ericson,
"Real-Time Collision Detection" (2005), section 5.1.5, vectorised over pairs of points and
triangles. A surface query compares each point with the triangles that can be nearest to it:
points are grouped into small cubes (tiles); a tile keeps the triangles whose bounding box lies
within `reach` of the tile or, with no reach, within an upper bound of the nearest distance of
every point of the tile (the distance from the tile's centre to the nearest triangle corner plus
the tile's half diagonal).
So the cost grows with the points times the triangles near them, not times all triangles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Nearest", "closest_on_triangles", "nearest_on_surface"]

TILE_POINTS = 4
"""Tiles are cubes of this many times the mean point spacing on a side."""

PAIR_BUDGET = 1 << 18
"""At most this many point-triangle pairs are evaluated at once (memory: about 0.1 GB)."""


@dataclass(frozen=True)
class Nearest:
    """The nearest surface points of a set of points."""

    distance: np.ndarray
    """(N,) distance to the surface [m]; inf where no triangle lies within the reach."""
    point: np.ndarray
    """(N, 3) the closest surface point (nan where the distance is inf)."""
    near_point: np.ndarray
    """(K,) with `near_triangle`: every pair of a point and a triangle whose distance is within
    the query's `tie` of that point's distance (at least the nearest triangle itself)."""
    near_triangle: np.ndarray
    """(K,) triangle indices of the pairs."""


def closest_on_triangles(p: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """(..., 3) closest point on triangle tri[..., 3, 3] to p[..., 3] (broadcast together).

    Ericson (2005), section 5.1.5: the point is projected onto the corner, edge or face whose
    Voronoi region holds it; corners and edges are tested before the face, so a degenerate
    triangle still gives a point on it.
    """
    a, b, c = tri[..., 0, :], tri[..., 1, :], tri[..., 2, :]
    ab, ac = b - a, c - a
    ap, bp, cp = p - a, p - b, p - c
    d1, d2 = _dot(ab, ap), _dot(ac, ap)
    d3, d4 = _dot(ab, bp), _dot(ac, bp)
    d5, d6 = _dot(ab, cp), _dot(ac, cp)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    with np.errstate(divide="ignore", invalid="ignore"):
        on_ab = a + _safe(d1 / (d1 - d3))[..., None] * ab
        on_ac = a + _safe(d2 / (d2 - d6))[..., None] * ac
        on_bc = b + _safe((d4 - d3) / ((d4 - d3) + (d5 - d6)))[..., None] * (c - b)
        total = va + vb + vc
        v = _safe(vb / total)[..., None]
        w = _safe(vc / total)[..., None]
    face = a + ab * v + ac * w
    regions = [
        (d1 <= 0.0) & (d2 <= 0.0),
        (d3 >= 0.0) & (d4 <= d3),
        (vc <= 0.0) & (d1 >= 0.0) & (d3 <= 0.0),
        (d6 >= 0.0) & (d5 <= d6),
        (vb <= 0.0) & (d2 >= 0.0) & (d6 <= 0.0),
        (va <= 0.0) & (d4 - d3 >= 0.0) & (d5 - d6 >= 0.0),
    ]
    choices = [a, b, on_ab, c, on_ac, on_bc]
    shape = np.broadcast_shapes(p.shape, a.shape)
    out = np.broadcast_to(face, shape).copy()
    for region, choice in zip(reversed(regions), reversed(choices), strict=True):
        out = np.where(region[..., None], np.broadcast_to(choice, shape), out)
    return out


def _dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise dot product over the last axis."""
    return np.einsum("...i,...i->...", u, v)


def _safe(x: np.ndarray) -> np.ndarray:
    """nan and inf (from a branch not taken, on a degenerate triangle) become 0."""
    return np.where(np.isfinite(x), x, 0.0)


def nearest_on_surface(
    points: np.ndarray,
    triangles: np.ndarray,
    spacing: float,
    reach: float = np.inf,
    tie: float = 0.0,
) -> Nearest:
    """The nearest point of the surface `triangles` (T, 3, 3) to each of `points` (N, 3).

    `spacing` is the points' typical spacing (it sizes the tiles). Triangles farther than
    `reach` are not looked at: a point with none within it gets distance inf. Every triangle
    within `tie` of a point's distance is listed in the result's near pairs.
    """
    n = len(points)
    distance = np.full(n, np.inf)
    closest = np.full((n, 3), np.nan)
    pairs_p: list[np.ndarray] = []
    pairs_t: list[np.ndarray] = []
    if n == 0 or len(triangles) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Nearest(distance, closest, empty, empty)
    tri_lo = triangles.min(axis=1)
    tri_hi = triangles.max(axis=1)
    corners = triangles.reshape(-1, 3)
    tile = TILE_POINTS * spacing
    keys = np.floor((points - points.min(axis=0)) / tile).astype(np.int64)
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0]))
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, np.any(np.diff(sorted_keys, axis=0) != 0, axis=1)])
    ends = np.r_[starts[1:], n]
    for start, end in zip(starts, ends, strict=True):
        index = order[start:end]
        p = points[index]
        lo, hi = p.min(axis=0), p.max(axis=0)
        centre, half_diagonal = 0.5 * (lo + hi), 0.5 * float(np.linalg.norm(hi - lo))
        bound = reach
        if not np.isfinite(reach):  # any triangle corner bounds every point's distance
            nearest_corner = float(np.sqrt(np.min(np.sum((corners - centre) ** 2, axis=1))))
            bound = nearest_corner + half_diagonal + tie
        gap = np.maximum(np.maximum(tri_lo - hi, lo - tri_hi), 0.0)
        candidates = np.flatnonzero(np.sum(gap * gap, axis=1) <= bound * bound * (1 + 1e-12))
        if len(candidates) == 0:
            continue
        chunk = max(1, PAIR_BUDGET // len(candidates))
        for s in range(0, len(index), chunk):
            rows = index[s : s + chunk]
            q = points[rows]
            near = closest_on_triangles(q[:, None, :], triangles[candidates][None, :, :, :])
            d = np.sqrt(np.sum((near - q[:, None, :]) ** 2, axis=2))
            d = np.where(d <= reach, d, np.inf)
            best = np.argmin(d, axis=1)
            dmin = d[np.arange(len(rows)), best]
            found = np.isfinite(dmin)
            distance[rows] = dmin
            closest[rows[found]] = near[np.flatnonzero(found), best[found]]
            i, j = np.nonzero((d <= dmin[:, None] + tie) & found[:, None])
            pairs_p.append(rows[i])
            pairs_t.append(candidates[j])
    if pairs_p:
        near_point, near_triangle = np.concatenate(pairs_p), np.concatenate(pairs_t)
    else:
        near_point = near_triangle = np.zeros(0, dtype=np.int64)
    return Nearest(distance, closest, near_point, near_triangle)
