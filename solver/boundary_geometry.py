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
"""

from __future__ import annotations

import numpy as np

from solver.config import Box, TankConfig

__all__ = ["obstacle_ghosts", "wall_ghosts"]

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
    depth = np.where(_wetted_faces(box, tank, tol), depth, np.inf)
    side = np.argmin(depth, axis=2)  # the nearest wetted face per axis (min face on a tie)
    nearest = np.take_along_axis(depth, side[..., None], axis=2)[..., 0]
    shallowest = nearest.min(axis=1, keepdims=True)
    mirrored = np.isfinite(nearest) & (nearest <= shallowest + DIAGONAL_TOLERANCE * dp)
    face = np.where(side == 0, lo, hi)
    return np.where(mirrored, 2.0 * (face - points), 0.0)


def _wetted_faces(box: Box, tank: TankConfig, tol: float) -> np.ndarray:
    """(3, 2) mask of the box's faces (min, max per axis) that do not lie on a tank face."""
    wetted = np.ones((3, 2), dtype=bool)
    for a in range(3):
        wetted[a, 0] = abs(box.min[a] - tank.box.min[a]) > tol
        tank_has_max_face = a < 2 or not tank.open_top  # an open top has no lid
        wetted[a, 1] = not (tank_has_max_face and abs(box.max[a] - tank.box.max[a]) <= tol)
    return wetted
