"""Inside or outside a surface, by counting where a vertical ray crosses it (numpy only).

A point is inside a closed surface when the ray from it straight up crosses the surface an odd
number of times (the Jordan parity rule; e.g. O'Rourke, "Computational Geometry in C", 1998,
section 7.4), and below an open height-field surface when that ray crosses it once. The points
asked about lie on vertical lattice columns x = origin + i spacing, so the crossings are found
once per column: every triangle is tested against the columns inside its xy bounding box
(barycentric coordinates of the column in the triangle's xy projection) and gives the height at
which the column passes through it.

A column through an edge or a corner of the surface would be counted by both triangles that
share it, or by neither; the rays are therefore cast from the column moved by (4.1e-7, 2.3e-7)
spacing, an offset no round-numbered mesh coordinate hits. Only points within 5e-7 spacing of a
vertical face can be misjudged by that, and callers treat points that close to the surface as
on it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["RAY_OFFSET", "crossings_above"]

RAY_OFFSET = ((math.sqrt(2.0) - 1.0) * 1e-6, (math.sqrt(3.0) - 1.5) * 1e-6)
"""The rays' offset from their column, in units of the column spacing (x, y)."""

PAIR_BUDGET = 1 << 22
"""At most this many triangle-column pairs are tested at once."""


def crossings_above(
    points: np.ndarray, triangles: np.ndarray, origin: np.ndarray, spacing: float
) -> np.ndarray:
    """(N,) int: how often the upward ray from each point crosses the surface `triangles`.

    `points` (N, 3) lie on columns origin[:2] + (i, j) spacing (within 1e-6 spacing), as
    lattice points do; a point with z = -inf gets the number of crossings of its column.
    """
    if len(points) == 0:
        return np.zeros(0, dtype=np.int64)
    ij_float = (points[:, :2] - np.asarray(origin[:2])) / spacing
    ij = np.round(ij_float).astype(np.int64)
    if not np.allclose(ij_float, ij, rtol=0.0, atol=1e-6):
        raise ValueError("crossings_above: the points do not lie on the lattice columns")
    lo = ij.min(axis=0)
    span = ij.max(axis=0) - lo + 1
    point_key = (ij[:, 0] - lo[0]) * span[1] + (ij[:, 1] - lo[1])
    columns = np.unique(point_key)
    cross_key, cross_z = _crossings(triangles, np.asarray(origin[:2]), spacing, lo, span, columns)
    keys = np.concatenate([cross_key, point_key])
    zs = np.concatenate([cross_z, points[:, 2]])
    is_cross = np.concatenate([np.ones(len(cross_key), np.int64), np.zeros(len(points), np.int64)])
    order = np.lexsort((is_cross, zs, keys))  # by column, then height; a point before a tie
    cum = np.cumsum(is_cross[order])
    sorted_keys = keys[order]
    position = np.empty(len(keys), dtype=np.int64)
    position[order] = np.arange(len(keys))
    column_end = np.searchsorted(sorted_keys, point_key, side="right")
    here = position[len(cross_key) :]
    # crossings in the column minus those at or below the point
    return cum[column_end - 1] - cum[here]


def _crossings(
    triangles: np.ndarray,
    origin: np.ndarray,
    spacing: float,
    lo: np.ndarray,
    span: np.ndarray,
    columns: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(column key, z) of every crossing of a column in `columns` through a triangle."""
    offset = np.asarray(RAY_OFFSET) * spacing
    xy = triangles[:, :, :2] - (origin + offset)  # ray at column (i, j) is at (i, j) spacing
    area2 = _cross(xy[:, 1] - xy[:, 0], xy[:, 2] - xy[:, 0])
    xy, z = xy[area2 != 0.0], triangles[area2 != 0.0][:, :, 2]  # vertical faces: never crossed
    first = np.maximum(np.ceil(xy.min(axis=1) / spacing).astype(np.int64), lo)
    last = np.minimum(np.floor(xy.max(axis=1) / spacing).astype(np.int64), lo + span - 1)
    counts = np.prod(np.maximum(last - first + 1, 0), axis=1)
    keys: list[np.ndarray] = []
    heights: list[np.ndarray] = []
    start = 0
    while start < len(counts):
        total = np.cumsum(counts[start:])
        stop = start + max(1, int(np.searchsorted(total, PAIR_BUDGET, side="right")))
        part = counts[start:stop]
        t = np.repeat(np.arange(start, stop), part)
        within = np.arange(len(t)) - np.repeat(np.cumsum(part) - part, part)
        width = last[t, 1] - first[t, 1] + 1
        i = first[t, 0] + within // width
        j = first[t, 1] + within % width
        q = np.stack([i, j], axis=1) * spacing
        a, b, c = xy[t, 0], xy[t, 1], xy[t, 2]
        ea, eb, ec = _cross(c - b, q - b), _cross(a - c, q - c), _cross(b - a, q - a)
        hit = ((ea > 0) & (eb > 0) & (ec > 0)) | ((ea < 0) & (eb < 0) & (ec < 0))
        key = (i - lo[0]) * span[1] + (j - lo[1])
        hit &= np.isin(key, columns)
        s = ea + eb + ec
        zt = z[t]
        height = (ea * zt[:, 0] + eb * zt[:, 1] + ec * zt[:, 2]) / np.where(hit, s, 1.0)
        keys.append(key[hit])
        heights.append(height[hit])
        start = stop
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(keys), np.concatenate(heights)


def _cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """z component of the cross product of 2D vectors (..., 2)."""
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]
