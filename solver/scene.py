"""A Config becomes particles on a lattice: positions, kinds and ghost vectors (numpy only).

Boundaries are rows of particles at spacing dp whose innermost layer lies `surface_gap` dp
behind the solid surface (solver/lattice.py): on it for dynamic boundary particles (DBC, as in
DualSPHysics and OpenFPM; Crespo et al. 2007), dp/2 behind it for the modified dynamic boundary
condition (mDBC; English et al. 2022, Comput. Part. Mech. 9, 1-15). The particles are placed so
that the surface is the geometry the config gives (the tank's inner faces, the obstacles'
faces): the lattice rules below run on the tank grown, and on the obstacle boxes shrunk, by
g = surface_gap dp on every side (g = 0 under DBC, which so keeps its layout exactly).

Lattice rules
-------------
* Along one axis of a box [lo, hi], the face lattice is lo, lo + dp, ... up to hi - dp/2, then
  hi itself: anchored at the min face, with the max face covered exactly even when the length
  is not a multiple of dp. The one irregular gap (next to the max face) lies in [dp/2, 3 dp/2).
  Under mDBC the same number of points divides [lo, hi] evenly instead (`face_lattice`), so
  that no gap is a hole wider than dp; a length that is a multiple of dp keeps lo + k dp.
* Tank walls: along each axis of the grown tank, `wall_layers` coordinates go outward from each
  face (lo - g - k dp and hi + g + k dp), and the face lattice fills between. Wall particles are
  the points of that product grid that lie in some axis' wall layers; with an open top there is
  no lid and the side walls stop at the grown tank's max z. Every point is produced once (a
  point belongs to the first axis on which it is in a wall layer), so edges and corners hold no
  duplicates.
* Fluid: points tank.min + (i + surface_gap) dp inside a block (min < x <= max per axis,
  tolerance 1e-9 relative), at least dp/2 from every tank face and from every obstacle box.
  With `particles.fluid_lattice = "fitted"` (one box block) the block's own lattice instead:
  round(size / dp) points per axis at block.min + (i + 1/2) spacing, spacing = size / count
  (the block cut to dp/2 from the wall layers under DBC), half the smallest spacing from every
  obstacle box (solver/lattice.py `fitted_axis`).
* Obstacles: the face lattice of the shrunk obstacle box on each axis; a solid box keeps all
  points, a hollow one the outer `wall_layers` on every side. Points within dp/2 of the grown
  tank (under DBC e.g. an obstacle's bottom layer standing on the floor, which the floor
  already covers) or of an earlier obstacle's shrunk box are dropped.

Meshes (solver/mesh_particles.py places their particles)
--------------------------------------------------------
* Mesh obstacles: the lattice points inside the closed surface (a shell: `wall_layers` deep),
  on the lattice anchored at the corner of the mesh's bounding box, as a box's is; so a mesh
  of a box whose sides are multiples of dp gives that box's particles. Points within dp/2 of
  the grown tank or of an earlier box obstacle's shrunk box are dropped as for boxes, and so
  are points within dp/2 of a particle of an earlier mesh obstacle or of the terrain.
* Terrain (kind WALL, after the tank walls): the points of the fluid lattice, in the tank's
  columns, that lie below the terrain surface and less than `wall_layers` dp deep (the band
  rule of solver/mesh_particles.py), clear of the walls like an obstacle. An obstacle standing
  on the terrain loses its points within dp/2 of the terrain's; those deeper down stay, buried
  where no water reaches.
* Fluid: also kept outside every mesh obstacle and above the terrain, at least dp/2 from their
  surfaces.
* Fluid meshes: a `[[fluid]]` block given as a closed mesh holds the points of the same fluid
  lattice that lie strictly inside the mesh (within its bounding box, dp/2 inside the tank),
  then carved like a box block. Under mDBC a mesh of a box whose faces lie at whole dp from
  tank.min gives that box block's points; under DBC, whose lattice points lie on such faces,
  the box rule keeps those on its max faces and the mesh none.

Since every coordinate list keeps its points at least dp/2 apart and the particle sets are
kept dp/2 apart from each other, no two particles in a scene are closer than dp/2.

Ghost vectors (mDBC only; zero under DBC and for fluid) follow solver/boundary_geometry.py.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from solver.boundary_geometry import dry_triangles, obstacle_ghosts, surface_ghosts, wall_ghosts
from solver.config import (
    Box,
    Config,
    ConfigError,
    FluidBlock,
    ObstacleConfig,
    TankConfig,
    fitted_block_axes,
    geometric_tolerance,
)
from solver.lattice import (
    even_boundary_lattice,
    face_lattice_size,
    fluid_index_range,
    surface_gap,
)
from solver.mesh_particles import (
    clear_of_surface,
    far_from,
    lattice_axis,
    solid_points,
    strictly_inside,
    tank_axis,
    terrain_points,
)
from solver.particle_kind import ParticleKind

__all__ = [
    "Scene",
    "build_scene",
    "face_lattice",
    "fluid_count_bound",
    "lattice_mismatches",
    "particle_count_bound",
]


@dataclass(frozen=True)
class Scene:
    """Initial particles: fluid first, then tank walls and terrain, then obstacles."""

    position: np.ndarray
    """(N, 3) float64 positions [m]."""
    kind: np.ndarray
    """(N,) int32 ParticleKind codes, sorted FLUID, WALL, OBSTACLE."""
    ghost: np.ndarray
    """(N, 3) float64 vectors [m] from each boundary particle to its mDBC ghost node (its mirror
    image through the boundary surface); zero for fluid, and for every particle under DBC."""

    def __post_init__(self) -> None:
        """Check the array shapes once, so consumers can rely on them."""
        if self.position.ndim != 2 or self.position.shape[1] != 3:
            raise ValueError(f"position must be (N, 3), got {self.position.shape}")
        if self.kind.shape != (self.position.shape[0],):
            raise ValueError(f"kind must be ({self.position.shape[0]},), got {self.kind.shape}")
        if self.ghost.shape != self.position.shape:
            raise ValueError(f"ghost must be {self.position.shape}, got {self.ghost.shape}")

    def __len__(self) -> int:
        """Number of particles."""
        return int(self.position.shape[0])

    def count(self, kind: ParticleKind) -> int:
        """Number of particles of one kind."""
        return int(np.count_nonzero(self.kind == int(kind)))

    def counts(self) -> dict[str, int]:
        """Particles per kind name, e.g. {"FLUID": 128310, "WALL": ..., "OBSTACLE": ...}."""
        return {k.name: self.count(k) for k in ParticleKind}


def face_lattice(
    lo: float, hi: float, dp: float, tol: float = 0.0, even: bool = False
) -> np.ndarray:
    """lo, lo + dp, ... while <= hi - dp/2 (within tol), then hi: both faces exactly covered.

    Where hi - lo is not a multiple of dp, the last gap of that lattice lies between dp/2 and
    3 dp/2; a gap wider than dp is a hole in a wall of boundary particles, through which water
    under pressure seeps (SPHERIC test 2 at dp 0.0075 lost 1,777 particles through the 1.33 dp
    gaps along two faces of its tank; validation/README.md, section 3). With `even` the same
    number of points divides [lo, hi] evenly instead: n = round((hi - lo) / dp) gaps of
    (hi - lo) / n, within dp / (2 n) of dp, so no row is a hole and none is crowded. A length
    that is a multiple of dp (within tol) keeps its lattice lo + k dp exactly.
    """
    gaps = face_lattice_size(lo, hi, dp, tol) - 1
    if even and gaps > 0 and abs((hi - lo) - gaps * dp) > tol:
        inner = lo + (hi - lo) * (np.arange(gaps) / gaps)
    else:
        inner = lo + dp * np.arange(gaps)
    return np.append(inner, hi)


def _product(xs: np.ndarray, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """All points (x, y, z) with x in xs, y in ys, z in zs, x varying slowest."""
    grid = np.meshgrid(xs, ys, zs, indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1)


def _shell(coords: list[np.ndarray], marked: list[np.ndarray]) -> np.ndarray:
    """Points of the product grid with a marked coordinate on at least one axis, each once.

    A point is produced by the first axis on which its coordinate is marked: for axis a, axes
    before a take unmarked coordinates only, axis a marked ones, axes after a any.
    """
    parts = []
    for a in range(3):
        axes = []
        for b in range(3):
            if b < a:
                axes.append(coords[b][~marked[b]])
            elif b == a:
                axes.append(coords[b][marked[b]])
            else:
                axes.append(coords[b])
        parts.append(_product(*axes))
    return np.concatenate(parts, axis=0)


def wall_particles(tank: TankConfig, dp: float, tol: float = 0.0, even: bool = False) -> np.ndarray:
    """Wall particles: `wall_layers` layers outward from `tank`'s faces, no lid if open.

    `tank` is the wall lattice's tank: the config's grown by the surface gap; `even` as for
    `face_lattice`.
    """
    layers = np.arange(tank.wall_layers)
    coords: list[np.ndarray] = []
    marked: list[np.ndarray] = []
    for a in range(3):
        lo, hi = tank.box.min[a], tank.box.max[a]
        middle = face_lattice(lo, hi, dp, tol, even)[1:-1]
        below = lo - dp * layers[::-1]
        if a == 2 and tank.open_top:
            above = np.array([hi])
            above_marked = np.zeros(1, dtype=bool)
        else:
            above = hi + dp * layers
            above_marked = np.ones(len(layers), dtype=bool)
        coords.append(np.concatenate([below, middle, above]))
        marked.append(
            np.concatenate([np.ones(len(below), bool), np.zeros(len(middle), bool), above_marked])
        )
    return _shell(coords, marked)


def obstacle_particles(
    box: Box, dp: float, hollow: bool, layers: int, tol: float, even: bool = False
) -> np.ndarray:
    """Points of an obstacle box: all of them, or the outer `layers` on every side if hollow;
    `even` as for `face_lattice`."""
    coords = [face_lattice(box.min[a], box.max[a], dp, tol, even) for a in range(3)]
    if not hollow:
        return _product(*coords)
    marked = []
    for c in coords:
        index = np.arange(len(c))
        marked.append((index < layers) | (index >= len(c) - layers))
    return _shell(coords, marked)


def fluid_particles(cfg: Config, tol: float) -> np.ndarray:
    """Fluid lattice points inside the blocks, clear of every solid: tank.min + (i + gap) dp,
    or the fitted lattice of the one block (`particles.fluid_lattice`)."""
    if cfg.fluid_lattice == "fitted":
        axes = [
            first + spacing * np.arange(count) for first, spacing, count in fitted_block_axes(cfg)
        ]
        points = _product(*axes)
        clearance = 0.5 * min(cfg.fluid_cell) - tol
        for obstacle in cfg.obstacles:  # boxes (check_fitted_lattice)
            points = points[_distance_to_box(points, obstacle.box) >= clearance]
        return points
    dp = cfg.dp
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    keys: list[np.ndarray] = []
    for i, block in enumerate(cfg.fluid_blocks):
        keys.append(_fluid_block_indices(cfg, block, tol))
        if block.mesh is not None and len(keys[-1]) == 0:
            lattice = "tank.min + (i + 1/2) dp" if gap else "tank.min + i dp"
            raise ConfigError(
                f"{cfg.source}: fluid[{i}].mesh: mesh {Path(block.mesh.path).name} holds no "
                f"lattice point {lattice} (dp = {dp:g}, physics.boundary = "
                f"{cfg.physics.boundary}) strictly inside it and dp/2 from the walls; make "
                "it larger or dp smaller"
            )
    index = np.unique(np.concatenate(keys, axis=0), axis=0)  # overlapping blocks: once
    points = np.asarray(tank.min) + dp * (index + gap)
    origin = np.asarray(tank.min) + gap * dp  # the fluid lattice's columns
    clearance = 0.5 * dp - tol
    for obstacle in cfg.obstacles:
        if obstacle.mesh is None:
            points = points[_distance_to_box(points, obstacle.box) >= clearance]
            continue
        near = _distance_to_box(points, obstacle.box) < clearance  # only these can be inside
        keep = np.ones(len(points), dtype=bool)
        tri = obstacle.mesh.surface.triangles
        keep[near] = clear_of_surface(points[near], tri, origin, dp, clearance, closed=True)
        points = points[keep]
    if cfg.terrain is not None:
        surface = cfg.terrain.surface
        low = points[:, 2] < surface.upper[2] + 0.5 * dp
        keep = np.ones(len(points), dtype=bool)
        tri = surface.triangles
        keep[low] = clear_of_surface(points[low], tri, origin, dp, clearance, closed=False)
        points = points[keep]
    return points


def _fluid_block_indices(cfg: Config, block: FluidBlock, tol: float) -> np.ndarray:
    """(M, 3) lattice indices i (points tank.min + (i + gap) dp) of a block's water: every
    point of a box block, those of a mesh block's bounding box strictly inside the mesh."""
    dp = cfg.dp
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    axes = [
        np.array(_block_indices(tank, block, a, dp, tol, gap), dtype=np.int64) for a in range(3)
    ]
    index = _product(*axes)
    if block.mesh is None:
        return index
    points = np.asarray(tank.min) + dp * (index + gap)
    origin = np.asarray(tank.min) + gap * dp  # the fluid lattice's columns
    return index[strictly_inside(points, block.mesh.surface.triangles, origin, dp)]


def _block_indices(tank: Box, block: Box, axis: int, dp: float, tol: float, gap: float) -> range:
    """Lattice indices i (point tank.min + (i + gap) dp) of a fluid block along one axis."""
    return fluid_index_range(
        tank.min[axis], tank.max[axis], block.min[axis], block.max[axis], dp, tol, gap
    )


MISMATCH_FRACTION = 0.25
"""A fluid block's built extent is reported when one of its ends lies this many dp or more
from the block's face (`lattice_mismatches`)."""


def lattice_mismatches(cfg: Config) -> list[str]:
    """Where a box [[fluid]] block's lattice does not fill the block it is built from.

    The fluid lattice has spacing dp, so a block whose extent is not a whole number of dp
    (reached from the tank's faces) is built up to dp/2 longer or shorter: SPHERIC test 2's
    0.55 m reservoir is 27.5 dp deep at dp = 0.02 and starts 0.56 m deep. The water a particle
    stands for is its cell of side dp around it, and the water can reach the tank's solid
    surfaces (under DBC it keeps dp/2 from the wall layer on them); an end of the built water
    MISMATCH_FRACTION dp or more from the block's (clipped to that reach) gives one line naming
    the block, the axis and both extents. Blocks bounded by a mesh are not checked, nor a block
    on the fitted lattice, which is built exactly. The message is a note, not an error: the
    lattice is the nearest the spacing allows.
    """
    if cfg.fluid_lattice == "fitted":
        return []  # the one block is filled exactly
    dp = cfg.dp
    tol = geometric_tolerance(cfg)
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    reach = (0.5 - gap) * dp  # from a tank face to the first cell's lower side
    notes: list[str] = []
    for i, block in enumerate(cfg.fluid_blocks):
        if block.mesh is not None:
            continue
        for axis in range(3):
            indices = _block_indices(tank, block, axis, dp, tol, gap)
            if len(indices) == 0:
                continue
            given = (
                max(block.min[axis], tank.min[axis] + reach),
                min(block.max[axis], tank.max[axis] - reach),
            )
            built = (
                tank.min[axis] + dp * (indices[0] + gap - 0.5),
                tank.min[axis] + dp * (indices[-1] + gap + 0.5),
            )
            if max(abs(b - g) for b, g in zip(built, given, strict=True)) < (
                MISMATCH_FRACTION * dp - tol
            ):
                continue
            name = "xyz"[axis]
            notes.append(
                f"{cfg.source}: fluid[{i}] along {name} is built as {len(indices)} layers of "
                f"dp = {dp:g} m, [{built[0]:.6g}, {built[1]:.6g}] m, where the block fills "
                f"[{given[0]:.6g}, {given[1]:.6g}] m ({given[1] - given[0]:.6g} m = "
                f"{(given[1] - given[0]) / dp:.4g} dp); a dp that divides it builds it exactly"
            )
    return notes


def terrain_particles(cfg: Config, tol: float) -> np.ndarray:
    """The terrain's particles: fluid lattice points below its surface, in a band (WALL)."""
    if cfg.terrain is None:
        return np.zeros((0, 3))
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    xs, ys, zs = (tank_axis(tank.min[a], tank.max[a], cfg.dp, gap, tol) for a in range(3))
    tri = cfg.terrain.surface.triangles
    return terrain_points(tri, xs, ys, zs, cfg.dp, gap, cfg.tank.wall_layers, tol)


def mesh_obstacle_particles(obstacle: ObstacleConfig, cfg: Config, tol: float) -> np.ndarray:
    """The lattice points of a mesh obstacle (solver/mesh_particles.py), before any is dropped."""
    assert obstacle.mesh is not None
    gap = surface_gap(cfg.physics.boundary)
    tri = obstacle.mesh.surface.triangles
    return solid_points(tri, cfg.dp, gap, obstacle.hollow, cfg.tank.wall_layers, tol)


def _grown(box: Box, margin: float) -> Box:
    """The box with every face moved outward by `margin` (inward where it is negative)."""
    lo, hi = box.min, box.max
    return Box(
        (lo[0] - margin, lo[1] - margin, lo[2] - margin),
        (hi[0] + margin, hi[1] + margin, hi[2] + margin),
    )


def _wall_lattice_tank(cfg: Config) -> TankConfig:
    """The tank whose faces the innermost wall layer lies on: grown by the surface gap."""
    margin = surface_gap(cfg.physics.boundary) * cfg.dp
    return dataclasses.replace(cfg.tank, box=_grown(cfg.tank.box, margin))


def _obstacle_lattice_boxes(cfg: Config) -> list[Box]:
    """The boxes each obstacle's outermost layer lies on: shrunk by the surface gap."""
    margin = surface_gap(cfg.physics.boundary) * cfg.dp
    return [_grown(obstacle.box, -margin) for obstacle in cfg.obstacles]


def _distance_to_box(points: np.ndarray, box: Box) -> np.ndarray:
    """Euclidean distance from each point to the closed box (0 inside)."""
    lo = np.asarray(box.min)
    hi = np.asarray(box.max)
    gap = np.maximum(np.maximum(lo - points, points - hi), 0.0)
    return np.sqrt(np.sum(gap * gap, axis=1))


def _clear_of_walls(points: np.ndarray, tank: TankConfig, dp: float, tol: float) -> np.ndarray:
    """Mask of points at least dp/2 inside `tank`'s faces, on and beyond which the walls lie.

    `tank` is the wall lattice's tank (the config's grown by the surface gap).
    """
    lo = np.asarray(tank.box.min)
    hi = np.asarray(tank.box.max)
    near = 0.5 * dp - tol
    ok = points[:, 2] - lo[2] >= near  # floor
    if tank.open_top:
        above_sides = points[:, 2] - hi[2] >= near  # side walls stop at the tank top
    else:
        ok &= hi[2] - points[:, 2] >= near  # lid
        above_sides = np.zeros(len(points), dtype=bool)
    for a in range(2):
        ok &= ((points[:, a] - lo[a] >= near) & (hi[a] - points[:, a] >= near)) | above_sides
    return ok


def build_scene(cfg: Config) -> Scene:
    """Particles of a case: fluid, then tank walls, then obstacles (see the module docstring)."""
    dp = cfg.dp
    tol = geometric_tolerance(cfg)
    wall_tank = _wall_lattice_tank(cfg)
    even = even_boundary_lattice(cfg.physics.boundary)
    walls = wall_particles(wall_tank, dp, tol, even)
    terrain = terrain_particles(cfg, tol)
    terrain = terrain[_clear_of_walls(terrain, wall_tank, dp, tol)]
    boxes = _obstacle_lattice_boxes(cfg)
    obstacles: list[np.ndarray] = []
    placed = [terrain]  # particles of the terrain and of earlier mesh obstacles
    for i, obstacle in enumerate(cfg.obstacles):
        if obstacle.mesh is None:
            pts = obstacle_particles(boxes[i], dp, obstacle.hollow, cfg.tank.wall_layers, tol, even)
        else:
            pts = mesh_obstacle_particles(obstacle, cfg, tol)
        pts = pts[_clear_of_walls(pts, wall_tank, dp, tol)]
        for earlier, box in zip(cfg.obstacles[:i], boxes[:i], strict=True):
            if earlier.mesh is None:
                pts = pts[_distance_to_box(pts, box) >= 0.5 * dp - tol]
        others = np.concatenate(placed, axis=0)
        pts = pts[far_from(pts, others, 0.5 * dp - tol)]
        if obstacle.mesh is not None:
            placed.append(pts)
        obstacles.append(pts)
    # DBC's mesh boundaries reach up to dp/2 beyond their surfaces: water keeps dp/2 from them
    fluid = fluid_particles(cfg, tol)
    fluid = fluid[far_from(fluid, np.concatenate(placed, axis=0), 0.5 * dp - tol)]
    if len(fluid) == 0:
        raise ConfigError(
            f"{cfg.source}: fluid: the [[fluid]] blocks hold no lattice point at least dp/2 "
            f"(dp = {cfg.dp:g}) from the walls, the terrain and the obstacles"
        )
    obstacle_points = np.concatenate(obstacles, axis=0) if obstacles else np.zeros((0, 3))
    position = np.ascontiguousarray(
        np.concatenate([fluid, walls, terrain, obstacle_points], axis=0)
    )
    kind = np.concatenate(
        [
            np.full(len(fluid), int(ParticleKind.FLUID), dtype=np.int32),
            np.full(len(walls) + len(terrain), int(ParticleKind.WALL), dtype=np.int32),
            np.full(len(obstacle_points), int(ParticleKind.OBSTACLE), dtype=np.int32),
        ]
    )
    ghost = np.zeros_like(position)
    if cfg.physics.boundary == "mdbc":
        ghost[len(fluid) : len(fluid) + len(walls)] = wall_ghosts(walls, cfg.tank)
        start = len(fluid) + len(walls)
        if cfg.terrain is not None:
            tri = cfg.terrain.surface.triangles
            ghost[start : start + len(terrain)] = surface_ghosts(terrain, tri, dp)
        start += len(terrain)
        for pts, obstacle in zip(obstacles, cfg.obstacles, strict=True):
            if obstacle.mesh is None:
                g = obstacle_ghosts(pts, obstacle.box, cfg.tank, dp, tol)
            else:
                tri = obstacle.mesh.surface.triangles
                g = surface_ghosts(pts, tri[~dry_triangles(tri, cfg.tank, tol)], dp)
            ghost[start : start + len(pts)] = g
            start += len(pts)
    return Scene(position=position.astype(np.float64), kind=kind, ghost=ghost)


def fluid_count_bound(cfg: Config) -> int:
    """The fluid particles `build_scene` makes, counted without placing them: an upper bound
    where some are carved out around obstacles or below the terrain (see
    `particle_count_bound`)."""
    tol = geometric_tolerance(cfg)
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    fluid = 0
    for block in cfg.fluid_blocks:
        lattice = math.prod(len(_block_indices(tank, block, a, cfg.dp, tol, gap)) for a in range(3))
        if cfg.fluid_lattice == "fitted":
            lattice = math.prod(count for _, _, count in fitted_block_axes(cfg))
        mesh_counted = block.mesh is not None and lattice <= MESH_COUNT_LIMIT
        fluid += len(_fluid_block_indices(cfg, block, tol)) if mesh_counted else lattice
    return fluid


def particle_count_bound(cfg: Config) -> int:
    """The particles `build_scene` makes, counted without placing them (for the memory check).

    Exact unless some points are dropped for lying within dp/2 of another set: fluid carved out
    around obstacles or below the terrain, obstacle or terrain points on the tank walls (under
    DBC, an obstacle standing on the floor) or on an earlier obstacle or the terrain. Those are
    counted too, so the result is an upper bound. Meshes (obstacles, terrain, fluid blocks) are
    counted by selecting their points (solver/mesh_particles.py, seconds for a million), unless
    a mesh's bounding box holds more than MESH_COUNT_LIMIT lattice points: then those are
    counted, a bound the memory check can refuse without selecting them.
    """
    dp = cfg.dp
    tol = geometric_tolerance(cfg)
    gap = surface_gap(cfg.physics.boundary)
    tank = cfg.tank.box
    fluid = fluid_count_bound(cfg)
    wall_box = _wall_lattice_tank(cfg).box
    layers = cfg.tank.wall_layers
    total, unmarked = [], []
    for a in range(3):
        middle = face_lattice_size(wall_box.min[a], wall_box.max[a], dp, tol) - 2
        open_top = a == 2 and cfg.tank.open_top
        total.append(layers + middle + (1 if open_top else layers))
        unmarked.append(middle + (1 if open_top else 0))
    walls = math.prod(total) - math.prod(unmarked)
    obstacles = 0
    for obstacle, box in zip(cfg.obstacles, _obstacle_lattice_boxes(cfg), strict=True):
        if obstacle.mesh is not None:
            obstacles += _mesh_count(obstacle.box, dp, gap, tol, obstacle, cfg)
            continue
        sizes = [face_lattice_size(box.min[a], box.max[a], dp, tol) for a in range(3)]
        hollow_core = math.prod(max(n - 2 * layers, 0) for n in sizes) if obstacle.hollow else 0
        obstacles += math.prod(sizes) - hollow_core
    terrain = 0
    if cfg.terrain is not None:
        lower, upper = cfg.terrain.surface.lower, cfg.terrain.surface.upper
        band = Box(
            (tank.min[0], tank.min[1], max(tank.min[2], lower[2] - layers * dp)),
            (tank.max[0], tank.max[1], min(float(upper[2]), tank.max[2])),
        )
        terrain = _mesh_count(band, dp, gap, tol, None, cfg)
    return fluid + walls + obstacles + terrain


MESH_COUNT_LIMIT = 20_000_000
"""Above this many lattice points in a mesh's bounding box, the count bound is those points."""


def _mesh_count(
    box: Box, dp: float, gap: float, tol: float, obstacle: ObstacleConfig | None, cfg: Config
) -> int:
    """Particles of a mesh obstacle (or the terrain, when `obstacle` is None) in `box`."""
    lattice = math.prod(len(lattice_axis(box.min[a], box.max[a], dp, gap, tol)) for a in range(3))
    if lattice > MESH_COUNT_LIMIT:
        return lattice
    if obstacle is None:
        return len(terrain_particles(cfg, tol))
    return len(mesh_obstacle_particles(obstacle, cfg, tol))
