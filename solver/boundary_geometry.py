"""Ghost nodes of boundary particles: each one's mirror image through the solid surface.

The modified dynamic boundary condition (mDBC; English, Domínguez, Vacondio, Crespo, Stansby,
Lind, Chiapponi and Gómez-Gesteira 2022, "Modified dynamic boundary conditions (mDBC) for
general-purpose SPH", Comput. Part. Mech. 9, 1-15) gives a boundary particle at x the density
that the fluid has at its ghost node 2 c - x, its mirror image through the point c of the
boundary surface it faces. The surface lies dp/2 beyond the innermost particle layer (see
solver/lattice.py), so a particle of layer k (k = 0 innermost) facing one face has its ghost
node (k + 1/2) dp in front of that face, 2 (k + 1/2) dp from itself. Particles near an edge or
corner mirror through the edge or corner (the normal along the corner's diagonal), as
DualSPHysics does for corners.

Here a ghost is stored as the vector from the particle to its ghost node, 2 (c - x).

Rules
-----
* Tank walls: c is x clamped to the tank box (with an open top, not from above). A particle
  facing one face mirrors straight through it; one beyond two or three faces (an edge or corner
  region) mirrors through the edge or corner point, diagonally on the edge's or corner's
  diagonal.
* Obstacles (x inside box B): only the faces of B that the fluid can touch count, not a face
  lying on a tank face (a box standing on the floor has no bottom surface). Per axis take the
  nearest such face and the depth below it; d is the smallest depth. Every axis whose depth is
  within 1e-3 dp of d is mirrored: ghost = 2 sum_a (face_a - x_a) e_a. A particle on an edge's
  or corner's diagonal (equally deep below two or three faces) so mirrors through the edge or
  corner, any other straight through its nearest face.
* Meshes (obstacles and terrain, solver/mesh_particles.py): the same rule on a surface of
  triangles, with the closest point found exactly (solver/surface_distance.py), as
  DualSPHysics' GenCase does for mDBC on arbitrary geometry. The planes of the wetted triangles
  within 1e-3 dp of the particle's distance d to the surface are the faces it is "equally deep
  below"; with one plane, the ghost is the mirror image through the closest surface point,
  2 d n. With several, it is the mirror image through the point of their common edge or corner
  nearest to the particle (c = x + N^T (N N^T)^-1 d, rows of N the unit normals towards the
  planes, d the distances to them): on a box this is the box rule above, and where the closest
  point is itself an edge or a corner of the surface it is that point. Planes are taken nearest
  first, on a tie in increasing order of their direction (as the box rule takes the nearer face
  of an axis, the min face on a tie), skipping any whose normal depends on those taken.
"""

from __future__ import annotations

import numpy as np

from solver.config import Box, TankConfig
from solver.surface_distance import nearest_on_surface

__all__ = ["dry_triangles", "obstacle_ghosts", "surface_ghosts", "wall_ghosts", "wetted_faces"]

#: Depths (in dp) that differ by less than this count as equal: the particle is on a diagonal.
DIAGONAL_TOLERANCE = 1e-3


def wall_ghosts(points: np.ndarray, tank: TankConfig) -> np.ndarray:
    """Vectors to the ghost nodes of tank wall particles: through the nearest tank-box point."""
    lo = np.asarray(tank.box.min, dtype=np.float64)
    hi = np.asarray(tank.box.max, dtype=np.float64)
    if tank.open_top:
        hi[2] = np.inf  # no lid: the side walls' upper rows mirror sideways
    return 2.0 * (np.clip(points, lo, hi) - points)


def obstacle_ghosts(
    points: np.ndarray, box: Box, tank: TankConfig, dp: float, tol: float
) -> np.ndarray:
    """Vectors to the ghost nodes of an obstacle's particles (inside `box`), see the rules."""
    lo = np.asarray(box.min, dtype=np.float64)
    hi = np.asarray(box.max, dtype=np.float64)
    # depth[n, a, s]: how far particle n lies below the min (s = 0) or max (s = 1) face on axis a
    depth = np.stack([points - lo, hi - points], axis=2)
    depth = np.where(wetted_faces(box, tank, tol), depth, np.inf)
    side = np.argmin(depth, axis=2)  # the nearest wetted face per axis (min face on a tie)
    nearest = np.take_along_axis(depth, side[..., None], axis=2)[..., 0]
    shallowest = nearest.min(axis=1, keepdims=True)
    mirrored = np.isfinite(nearest) & (nearest <= shallowest + DIAGONAL_TOLERANCE * dp)
    face = np.where(side == 0, lo, hi)
    return np.where(mirrored, 2.0 * (face - points), 0.0)


def wetted_faces(box: Box, tank: TankConfig, tol: float) -> np.ndarray:
    """(3, 2) mask of the box's faces (min, max per axis) that do not lie on a tank face."""
    wetted = np.ones((3, 2), dtype=bool)
    for a in range(3):
        wetted[a, 0] = abs(box.min[a] - tank.box.min[a]) > tol
        tank_has_max_face = a < 2 or not tank.open_top  # an open top has no lid
        wetted[a, 1] = not (tank_has_max_face and abs(box.max[a] - tank.box.max[a]) <= tol)
    return wetted


def dry_triangles(triangles: np.ndarray, tank: TankConfig, tol: float) -> np.ndarray:
    """(T,) mask of the triangles lying on a tank face, which the fluid cannot touch."""
    dry = np.zeros(len(triangles), dtype=bool)
    for a in range(3):
        coord = triangles[:, :, a]
        dry |= np.all(np.abs(coord - tank.box.min[a]) <= tol, axis=1)
        if a < 2 or not tank.open_top:
            dry |= np.all(np.abs(coord - tank.box.max[a]) <= tol, axis=1)
    return dry


def surface_ghosts(points: np.ndarray, triangles: np.ndarray, dp: float) -> np.ndarray:
    """Vectors to the ghost nodes of particles behind a triangle surface (the mesh rule)."""
    tie = DIAGONAL_TOLERANCE * dp
    near = nearest_on_surface(points, triangles, dp, tie=tie)
    ghost = 2.0 * (near.point - points)
    a = triangles[:, 0]
    normal = np.cross(triangles[:, 1] - a, triangles[:, 2] - a)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    offset = np.einsum("ij,ij->i", normal, a)
    # towards[k]: from the pair's point to its foot on the pair's triangle's plane
    p, t = near.near_point, near.near_triangle
    height = offset[t] - np.einsum("ij,ij->i", normal[t], points[p])
    towards = normal[t] * height[:, None]
    best = np.full(len(points), -1, dtype=np.int64)
    best[p] = t  # any near triangle: points with one plane only take the fast path below
    same = _same_plane(normal[t], offset[t], normal[best[p]], offset[best[p]], tie)
    several = np.unique(p[~same])
    order = np.argsort(p, kind="stable")
    p, towards = p[order], towards[order]
    starts = np.searchsorted(p, several, "left")
    ends = np.searchsorted(p, several, "right")
    for n, start, end in zip(several, starts, ends, strict=True):
        ghost[n] = 2.0 * _edge_or_corner(towards[start:end], tie)
    return ghost


def _same_plane(
    n1: np.ndarray, b1: np.ndarray, n2: np.ndarray, b2: np.ndarray, tol: float
) -> np.ndarray:
    """Whether the planes n1 . x = b1 and n2 . x = b2 are one (either orientation)."""
    cos = np.einsum("ij,ij->i", n1, n2)
    sign = np.where(cos >= 0.0, 1.0, -1.0)
    return (np.abs(cos) > 1.0 - 1e-9) & (np.abs(b1 - sign * b2) <= tol)


def _edge_or_corner(towards: np.ndarray, tie: float) -> np.ndarray:
    """From a particle to the nearest point of the planes' common edge or corner.

    `towards` (k, 3) holds the vector from the particle to its foot on each near plane.
    """
    length = np.linalg.norm(towards, axis=1)
    if length.max() <= tie:  # on the surface: no mirror to speak of
        return towards[np.argmax(length)]
    towards = towards[length > tie]
    unit = towards / np.linalg.norm(towards, axis=1, keepdims=True)
    chosen: list[int] = []
    length = length[length > tie]
    # nearest first (on a tie, the smallest direction: the box rule's min face)
    for k in np.lexsort((unit[:, 2], unit[:, 1], unit[:, 0], length)):
        trial = unit[[*chosen, k]]
        if np.linalg.matrix_rank(trial, tol=1e-6) == len(chosen) + 1:
            chosen.append(int(k))
        if len(chosen) == 3:
            break
    N = unit[chosen]
    d = np.einsum("ij,ij->i", N, towards[chosen])
    return N.T @ np.linalg.solve(N @ N.T, d)
