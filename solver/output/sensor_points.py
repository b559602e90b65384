"""Where a pressure sensor samples the water: on the face it is mounted on, or 1.5 h in front.

A sensor is given where the experiment mounts it, on a solid face (SPHERIC test 2's P1..P8 on
the box). Its `reading` (solver/output/probes.py) decides where the SPH field is read:

- "measuretool" (the default): as DualSPHysics reads pressure on solid faces in its own
  examples. Its MeasureTool interpolates the fluid particles alone (`-onlytype:-all,+fluid`)
  at a point moved 1.5 h from the face into the water: examples/main/01_DamBreak of
  https://github.com/DualSPHysics/DualSPHysics reads the obstacle's face pressure at
  x = 0.8779 for a face at x = 0.9, 1.5 h with its h = 0.0147 m ("PointsPressure_Correct"),
  and calls the points on the face itself "Incorrect". There a sensor's support reaches only
  h / 2 into the wall, so the reading does not depend on the boundary particles' own pressure.
- "face": on the face itself, where the support is half wall (see probes.py).

The face normal is the sensor's `normal` when the config gives one; otherwise the normal of the
tank face or box-obstacle face the position lies on (within dp / 4 of the face's plane, inside
its extent): a tank face's normal points into the tank, an obstacle face's out of the box, and a
sensor on an edge or corner moves along the sum of its faces' normals, normalised (the
diagonal). A position on no such face (in the water, or on a mesh without a `normal`) is read
where it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from solver.config import Box, Config, PressureSensor

MEASURETOOL_OFFSET_H = 1.5
"""How far in front of the face a "measuretool" sensor samples, in smoothing lengths h."""

ON_FACE_DP = 0.25
"""A position within this many dp of a face's plane (inside its extent) lies on the face."""


def _box_face_normals(
    point: np.ndarray, box: Box, inward: bool, faces: np.ndarray, tol: float
) -> list[np.ndarray]:
    """Unit normals of the faces of `box` (those `faces[a, side]` allows) that `point` lies on:
    pointing into the box when `inward` (a tank), out of it otherwise (an obstacle)."""
    lo, hi = np.asarray(box.min, dtype=np.float64), np.asarray(box.max, dtype=np.float64)
    if not np.all((point >= lo - tol) & (point <= hi + tol)):
        return []
    normals = []
    for a in range(3):
        for side, plane in enumerate((lo[a], hi[a])):
            if faces[a, side] and abs(point[a] - plane) <= tol:
                n = np.zeros(3)
                outward = 1.0 if side == 1 else -1.0
                n[a] = -outward if inward else outward
                normals.append(n)
    return normals


def face_normal(point: np.ndarray, cfg: Config) -> np.ndarray | None:
    """The unit normal into the water of the tank or box-obstacle face(s) `point` lies on, or
    None (module doc)."""
    # Imported here: boundary_geometry imports the config, which imports the probes and so this.
    from solver.boundary_geometry import wetted_faces

    tol = ON_FACE_DP * cfg.dp
    tank = cfg.tank
    tank_faces = np.ones((3, 2), dtype=bool)
    tank_faces[2, 1] = not tank.open_top
    normals = _box_face_normals(point, tank.box, True, tank_faces, tol)
    for obstacle in cfg.obstacles:
        if obstacle.mesh is None:
            faces = wetted_faces(obstacle.box, tank, tol)
            normals += _box_face_normals(point, obstacle.box, False, faces, tol)
    if not normals:
        return None
    total = np.sum(normals, axis=0)
    length = float(np.linalg.norm(total))
    return total / length if length > 0.0 else None


def sample_point(sensor: PressureSensor, cfg: Config) -> np.ndarray:
    """Where `sensor` reads the field: its position, moved MEASURETOOL_OFFSET_H h along its
    face normal into the water for a "measuretool" reading (module doc)."""
    position = np.asarray(sensor.position, dtype=np.float64)
    if sensor.reading != "measuretool":
        return position
    if sensor.normal is not None:
        normal = np.asarray(sensor.normal, dtype=np.float64)
        normal = normal / np.linalg.norm(normal)
    else:
        normal = face_normal(position, cfg)
        if normal is None:
            return position
    return position + MEASURETOOL_OFFSET_H * cfg.smoothing_length * normal
