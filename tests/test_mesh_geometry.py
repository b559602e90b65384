"""Geometry from mesh files: a mesh of a box gives the box obstacle's particles and mDBC ghost
nodes (the mirror images through the surface, English et al. 2022, Comput. Part. Mech. 9,
1-15); a sphere's particles lie in their layers behind its surface and mirror radially; a
terrain carries its layers below it and the water above it; and bad meshes are refused with
the file, key and reason. No Taichi needed; every case is small (dp >= 1/32 m)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from test_scene import min_pair_distance

from solver.config import ConfigError, config_to_toml, load_config, loads_config
from solver.mesh import load_surface, placement_matrix
from solver.particle_kind import ParticleKind
from solver.scene import Scene, build_scene, particle_count_bound
from solver.surface_crossings import crossings_above
from solver.surface_distance import closest_on_triangles, nearest_on_surface

ROOT = Path(__file__).resolve().parents[1]
FLUID, WALL, OBSTACLE = ParticleKind.FLUID, ParticleKind.WALL, ParticleKind.OBSTACLE
DP = 0.0625
"""A power of two, like every length below: binary STL's float32 holds them exactly."""

CASE = """
[particles]
dp = 0.0625
[tank]
min = [0.0, 0.0, 0.0]
max = [1.0, 1.0, 1.0]
wall_layers = 2
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [1.0, 1.0, 0.5]
"""

BOXES = {  # a box floating in the water and one standing on the floor, 6 x 6 x 6 dp
    "floating": ((0.5, 0.375, 0.25), (0.875, 0.75, 0.625)),
    "on_floor": ((0.25, 0.25, 0.0), (0.625, 0.625, 0.375)),
}


def box_stl(tmp_path: Path, lo: tuple, hi: tuple, name: str = "box.stl") -> Path:
    """A closed box mesh (12 triangles) from lo to hi, as binary STL."""
    mesh = trimesh.creation.box(bounds=np.array([lo, hi]))
    path = tmp_path / name
    path.write_bytes(mesh.export(file_type="stl"))
    return path


def sorted_scene(scene: Scene) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, ghosts and kinds in one order (by kind, then lattice position)."""
    key = np.round(scene.position / (0.25 * DP)).astype(np.int64)
    order = np.lexsort((key[:, 2], key[:, 1], key[:, 0], scene.kind))
    return scene.position[order], scene.ghost[order], scene.kind[order]


# -- a mesh of a box is the box -------------------------------------------------------------


@pytest.mark.parametrize("where", sorted(BOXES))
@pytest.mark.parametrize("hollow", ["true", "false"])
@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_cube_mesh_gives_the_box_obstacle(
    where: str, hollow: str, boundary: str, tmp_path: Path
) -> None:
    """Same particles (count, kinds, positions within 1e-6 dp) and the same ghost vectors as
    the box of the same extent: the solid's lattice is anchored at its corner like the box's,
    and the mesh ghost rule reduces to the box rule (faces straight, edge and corner diagonals
    diagonally, the min face on a tie, no mirror through a face on the floor)."""
    lo, hi = BOXES[where]
    box = f"[[obstacle]]\nmin = {list(lo)}\nmax = {list(hi)}\nhollow = {hollow}\n"
    mesh = f'[[obstacle]]\nmesh = "{box_stl(tmp_path, lo, hi)}"\nhollow = {hollow}\n'
    over = (f"physics.boundary={boundary}",)
    by_box = build_scene(loads_config(CASE + box, overrides=over))
    by_mesh = build_scene(loads_config(CASE + mesh, overrides=over))
    assert by_mesh.counts() == by_box.counts()
    assert by_box.count(OBSTACLE) > 0
    p_box, g_box, k_box = sorted_scene(by_box)
    p_mesh, g_mesh, k_mesh = sorted_scene(by_mesh)
    assert np.array_equal(k_box, k_mesh)
    assert np.abs(p_mesh - p_box).max() <= 1e-6 * DP
    assert np.abs(g_mesh - g_box).max() <= 1e-6 * DP
    if boundary == "mdbc":
        obstacle = g_mesh[k_mesh == OBSTACLE]
        diagonal = np.count_nonzero(np.abs(obstacle) > 1e-9, axis=1)
        assert set(diagonal) == {1, 2, 3}  # faces, edges and corners all met


def test_cube_mesh_counts_like_the_box(tmp_path: Path) -> None:
    """The memory check counts a mesh obstacle's particles: as many as the box's."""
    lo, hi = BOXES["floating"]
    box = loads_config(CASE + f"[[obstacle]]\nmin = {list(lo)}\nmax = {list(hi)}\n")
    mesh = loads_config(CASE + f'[[obstacle]]\nmesh = "{box_stl(tmp_path, lo, hi)}"\n')
    assert particle_count_bound(mesh) == particle_count_bound(box) >= len(build_scene(mesh))


# -- a sphere -------------------------------------------------------------------------------

SPHERE_R = 0.3
SPHERE_C = (0.5, 0.5, 0.5)


@pytest.fixture(scope="module")
def sphere_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An icosphere of radius 0.3 (1280 triangles; it departs from the sphere by < 1e-3 m)."""
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=SPHERE_R)
    path = tmp_path_factory.mktemp("sphere") / "sphere.obj"
    path.write_text(mesh.export(file_type="obj"))
    return path


def sphere_case(path: Path, boundary: str, layers: int) -> Scene:
    """The sphere as a shell obstacle, its lower half in the water."""
    text = CASE.replace("wall_layers = 2", f"wall_layers = {layers}")
    text += f'[[obstacle]]\nmesh = "{path}"\ntranslate = {list(SPHERE_C)}\nhollow = true\n'
    return build_scene(loads_config(text, overrides=(f"physics.boundary={boundary}",)))


def test_sphere_surface_particles_lie_within_half_dp_of_it(sphere_file: Path) -> None:
    """DBC, one layer: the particles sample the surface itself, the lattice points within dp/2
    of it (inside or out), and they cover it: every point of the surface has a particle within
    dp (no holes for the water), which lies outside the sphere's water, dp/2 from them."""
    scene = sphere_case(sphere_file, "dbc", 1)
    x = scene.position[scene.kind == OBSTACLE]
    depth = SPHERE_R - np.linalg.norm(x - SPHERE_C, axis=1)
    sag = 1e-3  # the icosphere's flat faces lie up to this inside the sphere
    assert np.abs(depth).max() <= 0.5 * DP + sag
    rng = np.random.default_rng(0)
    u = rng.normal(size=(2000, 3))
    surface = SPHERE_C + SPHERE_R * u / np.linalg.norm(u, axis=1, keepdims=True)
    gap = np.linalg.norm(surface[:, None, :] - x[None, :, :], axis=2)
    assert gap.min(axis=1).max() <= DP
    fluid = scene.position[scene.kind == FLUID]
    assert np.linalg.norm(fluid[:, None, :] - x[None, :, :], axis=2).min() >= 0.5 * DP - 1e-9


def test_sphere_mdbc_ghosts_mirror_through_the_surface(sphere_file: Path) -> None:
    """mDBC, two layers: particles lie less than 2 dp deep, and each ghost node is the mirror
    image through the surface: half the ghost vector is the depth, and it points outward along
    the radius (within the icosphere's facets: their normals lean up to 0.1 rad from it)."""
    scene = sphere_case(sphere_file, "mdbc", 2)
    obstacle = scene.kind == OBSTACLE
    x, g = scene.position[obstacle], scene.ghost[obstacle]
    radial = x - SPHERE_C
    r = np.linalg.norm(radial, axis=1)
    depth = SPHERE_R - r
    assert depth.min() >= 0.0 and depth.max() < 2.0 * DP
    length = np.linalg.norm(g, axis=1)
    assert np.abs(0.5 * length - depth).max() <= 1.5e-3  # the facets' sag, 8e-4 here
    deep = length > 0.1 * DP
    cos = np.einsum("ij,ij->i", g[deep], radial[deep]) / (length[deep] * r[deep])
    assert cos.min() >= np.cos(0.1)
    fluid = scene.position[scene.kind == FLUID]
    assert np.linalg.norm(fluid - SPHERE_C, axis=1).min() >= SPHERE_R + 0.5 * DP - 1e-3


# -- terrain --------------------------------------------------------------------------------


def terrain_stl(tmp_path: Path, heights: np.ndarray, size: float = 1.0) -> Path:
    """A height field z = heights[i, j] on a grid over [0, size]^2 (open, two triangles a cell)."""
    n = heights.shape[0]
    xs = np.linspace(0.0, size, n)
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.stack([X.ravel(), Y.ravel(), heights.ravel()], axis=1)
    faces = []
    for i in range(n - 1):
        for j in range(n - 1):
            a, b, c, d = i * n + j, (i + 1) * n + j, (i + 1) * n + j + 1, i * n + j + 1
            faces += [[a, b, c], [a, c, d]]
    path = tmp_path / "terrain.stl"
    path.write_bytes(trimesh.Trimesh(vertices, np.array(faces)).export(file_type="stl"))
    return path


def test_flat_terrain_layers_and_ghosts(tmp_path: Path) -> None:
    """A flat terrain at z = 0.25 (mDBC): wall_layers layers at 0.25 - (k + 1/2) dp in every
    fluid column, mirrored straight up by (2k + 1) dp; the water starts dp/2 above it."""
    path = terrain_stl(tmp_path, np.full((3, 3), 0.25))
    cfg = loads_config(CASE + f'[terrain]\nmesh = "{path}"\n')
    scene = build_scene(cfg)
    tank_walls = build_scene(loads_config(CASE)).count(WALL)
    wall = scene.kind == WALL
    terrain = np.flatnonzero(wall)[tank_walls:]
    x, g = scene.position[terrain], scene.ghost[terrain]
    assert len(terrain) == 16 * 16 * 2
    k = (0.25 - x[:, 2]) / DP - 0.5
    assert np.allclose(k, np.round(k), atol=1e-9) and set(np.round(k)) == {0.0, 1.0}
    assert np.allclose(g[:, :2], 0.0, atol=1e-12)
    assert np.allclose(g[:, 2], (2 * np.round(k) + 1) * DP, atol=1e-9)
    fluid = scene.position[scene.kind == FLUID]
    assert fluid[:, 2].min() == pytest.approx(0.25 + 0.5 * DP)
    assert scene.count(FLUID) == 16 * 16 * 4


def test_sloped_terrain_keeps_water_above_and_layers_below(tmp_path: Path) -> None:
    """A valley z = 0.1 + 0.4 |x - 0.5| (a V along y): terrain particles below it, less than
    wall_layers dp deep, water above it and at least dp/2 from it."""
    xs = np.linspace(0.0, 1.0, 5)
    heights = np.repeat((0.1 + 0.4 * np.abs(xs - 0.5))[:, None], 5, axis=1)
    path = terrain_stl(tmp_path, heights)
    cfg = loads_config(CASE + f'[terrain]\nmesh = "{path}"\n')
    scene = build_scene(cfg)
    tank_walls = build_scene(loads_config(CASE)).count(WALL)
    terrain = scene.position[np.flatnonzero(scene.kind == WALL)[tank_walls:]]
    surface = 0.1 + 0.4 * np.abs(terrain[:, 0] - 0.5)
    distance = (surface - terrain[:, 2]) / np.sqrt(1.0 + 0.4**2)  # to the nearer slope
    assert terrain[:, 2].max() <= surface.max() and np.all(terrain[:, 2] <= surface + 1e-9)
    assert distance.max() < 2.0 * DP + 1e-9
    fluid = scene.position[scene.kind == FLUID]
    above = fluid[:, 2] - (0.1 + 0.4 * np.abs(fluid[:, 0] - 0.5))
    assert above.min() >= 0.5 * DP * np.sqrt(1.0 + 0.4**2) - 1e-9
    assert (
        np.linalg.norm(scene.ghost[np.flatnonzero(scene.kind == WALL)[tank_walls:]], axis=1).min()
        > 0
    )


# -- the geometry routines ------------------------------------------------------------------


def test_closest_point_on_a_triangle_by_region() -> None:
    """Ericson's regions: a corner, an edge and the face of the triangle (0,0,0) (1,0,0) (0,1,0)."""
    tri = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    points = np.array([[-1.0, -1.0, 1.0], [0.5, -2.0, 0.0], [1.0, 1.0, 0.0], [0.2, 0.3, 5.0]])
    expected = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.0]])
    assert np.allclose(closest_on_triangles(points, tri[None]), expected)


def test_nearest_on_surface_equals_brute_force() -> None:
    """The tiled search finds the same distances as comparing every point with every triangle."""
    mesh = trimesh.creation.icosphere(subdivisions=2, radius=0.3)
    tri = np.asarray(mesh.vertices)[mesh.faces]
    points = np.random.default_rng(1).uniform(-0.5, 0.5, size=(400, 3))
    near = nearest_on_surface(points, tri, 0.05)
    brute = np.linalg.norm(
        closest_on_triangles(points[:, None], tri[None]) - points[:, None], axis=2
    )
    assert np.allclose(near.distance, brute.min(axis=1), rtol=0, atol=1e-12)
    reach = nearest_on_surface(points, tri, 0.05, reach=0.05).distance
    assert np.array_equal(np.isfinite(reach), brute.min(axis=1) <= 0.05)


def test_ray_parity_inside_a_sphere() -> None:
    """Lattice points inside the icosphere have an odd count of crossings above them."""
    mesh = trimesh.creation.icosphere(subdivisions=2, radius=0.3)
    tri = np.asarray(mesh.vertices)[mesh.faces]
    axis = -0.5 + 0.05 * np.arange(21)
    points = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1).reshape(-1, 3)
    inside = crossings_above(points, tri, np.array([-0.5, -0.5]), 0.05) % 2 == 1
    r = np.linalg.norm(points, axis=1)
    assert np.all(inside[r < 0.29]) and not np.any(inside[r > 0.3])


def test_placement_scales_then_rotates_then_moves(tmp_path: Path) -> None:
    """x' = Rz Ry Rx (S x) + t, with right angles exact."""
    matrix = placement_matrix((2.0, 1.0, 1.0), (0.0, 0.0, 90.0))
    assert np.array_equal(matrix @ np.array([1.0, 0.0, 0.0]), np.array([0.0, 2.0, 0.0]))
    path = box_stl(tmp_path, (0.0, 0.0, 0.0), (1.0, 0.5, 0.25))
    surface = load_surface(path, (2.0, 1.0, 1.0), (0.0, 0.0, 90.0), (1.0, 0.0, 0.0))
    assert np.allclose(surface.lower, (0.5, 0.0, 0.0)) and np.allclose(
        surface.upper, (1.0, 2.0, 0.25)
    )
    assert surface.closed and surface.volume == pytest.approx(0.25)


# -- the shipped case and the config --------------------------------------------------------


def test_houses_case_round_trips_and_places_its_houses() -> None:
    """configs/dambreak_houses.toml at a coarse dp: the mesh path is resolved against the
    config's folder and written back absolute; four houses with streets between them, and
    the memory check counts exactly what is placed."""
    path = ROOT / "configs" / "dambreak_houses.toml"
    cfg = load_config(path, ["particles.dp=0.025"])
    mesh = cfg.obstacles[0].mesh
    assert mesh is not None and Path(mesh.path) == ROOT / "configs" / "meshes" / "houses.stl"
    assert loads_config(config_to_toml(cfg)) == cfg
    assert cfg.obstacles[0].box.min == pytest.approx((0.9, 0.07, 0.0))
    assert cfg.obstacles[0].box.max == pytest.approx((1.0, 0.6, 0.12))
    scene = build_scene(cfg)
    houses = scene.position[scene.kind == OBSTACLE]
    row = np.floor((houses[:, 1] - 0.07) / 0.15)
    assert np.array_equal(np.unique(row), [0, 1, 2, 3])
    assert np.all((houses[:, 1] - 0.07) - 0.15 * row < 0.08)  # nothing in the streets
    assert len(scene) == particle_count_bound(cfg)


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        ('mesh = "no_such.stl"', ("obstacle[0].mesh", "no_such.stl", "no such file")),
        ('mesh = "model.step"', ("not a mesh format read here", ".stl, .obj, .ply, .off")),
        ('mesh = "{box}"\nmin = [0.1, 0.1, 0.1]', ("obstacle[0].min", "not both")),
        ('min = [0.1, 0.1, 0.1]\nmax = [0.2, 0.2, 0.2]\nscale = [2.0, 2.0, 2.0]',
         ("obstacle[0].scale", "places a mesh")),
        ('mesh = "{box}"\nscale = [1.0, 1.0, 0.01]', ("thinner than dp", "on z")),
        ('mesh = "{box}"\ntranslate = [0.8, 0.0, 0.0]',
         ("obstacle[0].mesh", "not inside the tank")),
        ('mesh = "{box}"\nscale = [0.0, 1.0, 1.0]', ("obstacle[0].scale", "> 0")),
        ("min = [0.1, 0.1, 0.1]", ("obstacle[0].max", "missing", "unless mesh is given")),
    ],
)  # fmt: skip
def test_bad_mesh_obstacles_are_refused(
    extra: str, fragments: tuple[str, ...], tmp_path: Path
) -> None:
    box = box_stl(tmp_path, (0.5, 0.375, 0.25), (0.875, 0.75, 0.625))
    text = CASE + "[[obstacle]]\n" + extra.format(box=box) + "\n"
    with pytest.raises(ConfigError) as error:
        loads_config(text, base=tmp_path)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_open_mesh_is_refused_as_an_obstacle_and_taken_as_a_terrain(tmp_path: Path) -> None:
    """A box without its lid is not closed: no obstacle; an open height field is a terrain."""
    mesh = trimesh.creation.box(bounds=np.array([(0.5, 0.375, 0.25), (0.875, 0.75, 0.625)]))
    top = mesh.triangles_center[:, 2] > 0.6
    open_box = tmp_path / "open.stl"
    open_box.write_bytes(trimesh.Trimesh(mesh.vertices, mesh.faces[~top]).export(file_type="stl"))
    with pytest.raises(ConfigError, match=r"not closed \(watertight\): 4 edges"):
        loads_config(CASE + f'[[obstacle]]\nmesh = "{open_box}"\n')
    with pytest.raises(ConfigError, match=r"terrain.mesh.*x = 0.03125, y = 0.03125 misses it"):
        loads_config(CASE + f'[terrain]\nmesh = "{open_box}"\n')
    closed = box_stl(tmp_path, (0.0, 0.0, 0.125), (1.0, 1.0, 0.25), "slab.stl")
    with pytest.raises(ConfigError, match="crosses it 2 times: it is not a height field"):
        loads_config(CASE + f'[terrain]\nmesh = "{closed}"\n')


@pytest.mark.parametrize("boundary", ["mdbc", "dbc"])
def test_obstacle_on_a_terrain_keeps_every_pair_apart(boundary: str, tmp_path: Path) -> None:
    """A box mesh standing on a sloped terrain, a box obstacle beside it, water over both: no
    two particles closer than dp/2 (the obstacle's points near the terrain's give way), and
    every ghost finite."""
    xs = np.linspace(0.0, 1.0, 5)
    path = terrain_stl(tmp_path, np.repeat((0.05 + 0.1 * xs)[:, None], 5, axis=1))
    cube = box_stl(tmp_path, (0.5, 0.25, 0.0), (0.75, 0.5, 0.375))
    text = CASE + f'[terrain]\nmesh = "{path}"\n[[obstacle]]\nmesh = "{cube}"\nhollow = true\n'
    text += "[[obstacle]]\nmin = [0.125, 0.5, 0.0]\nmax = [0.375, 0.75, 0.25]\n"
    scene = build_scene(loads_config(text, overrides=(f"physics.boundary={boundary}",)))
    assert min_pair_distance(scene.position, 0.5 * DP) >= 0.5 * DP * (1.0 - 1e-9)
    assert np.all(np.isfinite(scene.ghost)) and scene.count(OBSTACLE) > 0
