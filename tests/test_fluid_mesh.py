"""Water from a closed mesh (`[[fluid]] mesh = ...`): the fluid lattice points strictly inside
it. A mesh of a box gives the box block's particles, carved around obstacles alike; a sphere of
water fills the sphere; h_swl takes the mesh's top; the memory check counts what is placed; the
resolved config.toml round-trips from another folder. Refusals: tests/bad_configs/fluid_*.toml.
No Taichi needed; every case is small (dp >= 1/32 m)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import trimesh
from test_mesh_geometry import box_stl
from test_scene import min_pair_distance

from solver.config import ConfigError, config_to_toml, load_config, loads_config
from solver.particle_kind import ParticleKind
from solver.scene import Scene, build_scene, particle_count_bound

FLUID = ParticleKind.FLUID
DP = 0.0625
"""A power of two, like every length below: binary STL's float32 holds them exactly."""

CASE = """
[particles]
dp = 0.0625
[tank]
min = [0.0, 0.0, 0.0]
max = [1.0, 1.0, 1.0]
wall_layers = 2
"""

OBSTACLE = "[[obstacle]]\nmin = [0.25, 0.25, 0.0]\nmax = [0.5, 0.5, 0.25]\n"
"""A box standing in the water of the blocks below, so both are carved around it."""


def fluid_of(scene: Scene) -> np.ndarray:
    """The fluid particles, sorted by position."""
    fluid = scene.position[scene.kind == FLUID]
    key = np.round(fluid / (0.25 * DP)).astype(np.int64)
    return fluid[np.lexsort((key[:, 2], key[:, 1], key[:, 0]))]


def box_block(lo: tuple, hi: tuple) -> str:
    """A [[fluid]] box block as TOML."""
    return f"[[fluid]]\nmin = {list(lo)}\nmax = {list(hi)}\n"


@pytest.mark.parametrize(
    ("boundary", "lo", "hi"),
    [  # faces midway between the lattice planes: tank.min + (i + 1/2) dp, tank.min + i dp
        ("mdbc", (0.0, 0.0, 0.0), (0.75, 1.0, 0.5)),
        ("mdbc", (0.125, 0.0625, 0.0), (0.875, 0.625, 0.4375)),
        ("dbc", (0.03125, 0.03125, 0.03125), (0.78125, 0.96875, 0.53125)),
    ],
)
def test_cube_mesh_gives_the_box_block(boundary: str, lo: tuple, hi: tuple, tmp_path: Path) -> None:
    """Same fluid particles as the box block of the same extent, carved around an obstacle
    alike, the same h_swl, and the memory check counts them exactly."""
    over = (f"physics.boundary={boundary}",)
    box = loads_config(CASE + box_block(lo, hi) + OBSTACLE, overrides=over)
    mesh_block = f'[[fluid]]\nmesh = "{box_stl(tmp_path, lo, hi)}"\n'
    mesh = loads_config(CASE + mesh_block + OBSTACLE, overrides=over)
    by_box, by_mesh = build_scene(box), build_scene(mesh)
    assert by_mesh.counts() == by_box.counts()
    assert np.abs(fluid_of(by_mesh) - fluid_of(by_box)).max() <= 1e-9
    whole = math.prod(round((hi[a] - lo[a]) / DP) for a in range(3))
    assert by_box.count(FLUID) < whole  # carved around the obstacle
    assert mesh.water_height == box.water_height == hi[2]
    assert particle_count_bound(mesh) == particle_count_bound(box)


def test_dbc_lattice_points_on_the_mesh_are_not_water(tmp_path: Path) -> None:
    """Under DBC the lattice points tank.min + i dp lie on faces at whole dp: the box rule
    (min, max] keeps those on the max faces, the mesh (strictly inside) none, so a mesh from
    lo to hi holds the box block from lo to hi - dp."""
    lo, hi = (0.0, 0.25, 0.0), (0.5, 0.75, 0.5)
    over = ("physics.boundary=dbc",)
    mesh = loads_config(CASE + f'[[fluid]]\nmesh = "{box_stl(tmp_path, lo, hi)}"\n', overrides=over)
    shrunk = loads_config(CASE + box_block(lo, tuple(h - DP for h in hi)), overrides=over)
    assert np.array_equal(fluid_of(build_scene(mesh)), fluid_of(build_scene(shrunk)))


SPHERE_R = 0.3
SPHERE_C = (0.5, 0.5, 0.6)
SAG = 1.5e-3
"""The icosphere's flat faces lie up to this inside the sphere (subdivisions = 3: 1.2e-3 m)."""


@pytest.fixture(scope="module")
def sphere_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An icosphere of radius 0.3 (1280 triangles) about the origin, as OBJ."""
    mesh = trimesh.creation.icosphere(subdivisions=3, radius=SPHERE_R)
    path = tmp_path_factory.mktemp("sphere") / "sphere.obj"
    path.write_text(mesh.export(file_type="obj"))
    return path


def test_sphere_of_water_fills_the_sphere(sphere_file: Path) -> None:
    """A ball of water above a pool (dp = 1/32 m): every sphere particle lies inside the
    sphere, every lattice point deeper than the mesh's sag is one, their number is the
    sphere's volume / dp^3 within 2 %, and h_swl is the ball's top."""
    dp = DP / 2
    pool = box_block((0.0, 0.0, 0.0), (1.0, 1.0, 0.125))
    ball = f'[[fluid]]\nmesh = "{sphere_file}"\ntranslate = {list(SPHERE_C)}\n'
    cfg = loads_config(CASE.replace("dp = 0.0625", f"dp = {dp}") + pool + ball)
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    in_ball = fluid[fluid[:, 2] > 0.125]
    r = np.linalg.norm(in_ball - SPHERE_C, axis=1)
    assert r.max() < SPHERE_R
    axis = (np.arange(round(1.0 / dp)) + 0.5) * dp  # the fluid lattice under mDBC
    grid = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1).reshape(-1, 3)
    deep = grid[np.linalg.norm(grid - SPHERE_C, axis=1) < SPHERE_R - SAG]
    assert len(deep) > 0.9 * len(in_ball)
    index = {tuple(k) for k in np.round(in_ball / dp - 0.5).astype(np.int64)}
    assert all(tuple(k) in index for k in np.round(deep / dp - 0.5).astype(np.int64))
    volume = 4.0 / 3.0 * math.pi * SPHERE_R**3
    assert len(in_ball) == pytest.approx(volume / dp**3, rel=0.02)
    assert len(fluid) - len(in_ball) == 32 * 32 * 4  # the pool, 4 layers
    assert cfg.water_height == pytest.approx(SPHERE_C[2] + SPHERE_R, abs=SAG)
    assert cfg.water_height == float(cfg.fluid_blocks[1].mesh.surface.upper[2])
    assert min_pair_distance(scene.position, 1.01 * dp) >= dp * (1.0 - 1e-9)
    assert particle_count_bound(cfg) == len(scene)


def test_sphere_of_water_keeps_clear_of_a_mesh_obstacle(sphere_file: Path, tmp_path: Path) -> None:
    """Water filling a mesh is carved around a mesh obstacle like box water: outside it and
    at least dp/2 from its particles."""
    cube = box_stl(tmp_path, (0.375, 0.375, 0.375), (0.625, 0.625, 0.625))
    ball = f'[[fluid]]\nmesh = "{sphere_file}"\ntranslate = [0.5, 0.5, 0.5]\n'
    scene = build_scene(loads_config(CASE + ball + f'[[obstacle]]\nmesh = "{cube}"\n'))
    fluid = scene.position[scene.kind == FLUID]
    solid = scene.position[scene.kind == ParticleKind.OBSTACLE]
    assert len(solid) == 4**3
    assert np.all(np.abs(fluid - 0.5).max(axis=1) > 0.125)  # none inside the cube
    assert min_pair_distance(np.vstack([fluid, solid]), 1.01 * DP) >= DP * (1.0 - 1e-9)


def test_mesh_block_round_trips_through_config_toml(tmp_path: Path) -> None:
    """A mesh given relative to the case's folder is written with its absolute path, so the
    config.toml written into an output folder loads there to an equal config and scene."""
    case_dir, out_dir = tmp_path.resolve() / "case", tmp_path / "out"
    (case_dir / "meshes").mkdir(parents=True)
    out_dir.mkdir()
    box_stl(case_dir / "meshes", (0.0, 0.0, 0.0), (0.5, 0.5, 0.5), name="water.stl")
    text = CASE + '[[fluid]]\nmesh = "meshes/water.stl"\nrotate = [0.0, 0.0, 90.0]\n'
    text += "translate = [0.75, 0.25, 0.0]\n"
    (case_dir / "case.toml").write_text(text)
    cfg = load_config(case_dir / "case.toml")
    written = out_dir / "config.toml"
    written.write_text(config_to_toml(cfg))
    again = load_config(written)
    assert again == cfg
    assert again.fluid_blocks[0].mesh is not None
    assert again.fluid_blocks[0].mesh.path == str(case_dir / "meshes" / "water.stl")
    assert again.fluid_blocks[0].min == pytest.approx((0.25, 0.25, 0.0))
    assert np.array_equal(fluid_of(build_scene(again)), fluid_of(build_scene(cfg)))


def test_mesh_block_overlapping_another_mesh_block_is_refused(sphere_file: Path) -> None:
    """Two mesh blocks are judged by their bounding boxes, as a mesh and a box block are
    (tests/bad_configs/fluid_mesh_overlaps_block.toml): two balls 0.69 m apart, 0.6 m across,
    whose boxes overlap by 0.2 m on each axis, are refused."""
    a = f'[[fluid]]\nmesh = "{sphere_file}"\ntranslate = [0.3, 0.3, 0.3]\n'
    b = f'[[fluid]]\nmesh = "{sphere_file}"\ntranslate = [0.7, 0.7, 0.7]\n'
    with pytest.raises(ConfigError, match=r"fluid\[1\]\.mesh: mesh sphere\.obj .* overlaps "
                       r"fluid\[0\] mesh sphere\.obj .*by its bounding box"):  # fmt: skip
        loads_config(CASE + a + b)
