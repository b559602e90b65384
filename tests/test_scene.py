"""The initial particle lattice: counts of the reference cases, walls exactly on the tank faces,
fluid clear of walls and obstacles, and no two particles closer than dp/2. No Taichi needed."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from solver.config import Config, load_config, loads_config
from solver.particle_kind import ParticleKind
from solver.scene import Scene, build_scene, face_lattice, particle_count_bound

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
SEED = ROOT / "configs" / "dambreak.toml"
FLUID, WALL, OBSTACLE = ParticleKind.FLUID, ParticleKind.WALL, ParticleKind.OBSTACLE

BOX_CASE = """
[particles]
dp = 0.05
[tank]
min = [0.0, 0.0, 0.0]
max = [1.0, 1.0, 1.0]
wall_layers = {layers}
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.2, 1.0, 0.2]
[[obstacle]]  # floating, clear of every wall: 7 x 7 x 7 lattice points
min = [0.5, 0.35, 0.4]
max = [0.8, 0.65, 0.7]
hollow = {hollow}
"""


def min_pair_distance(points: np.ndarray, cell: float) -> float:
    """Smallest distance between two points, exact when it is below `cell` (else >= cell).

    Bins points into cells of size `cell` and compares every point with all points of the 27
    surrounding cells: a brute-force check, independent of how the scene was built.
    """
    keys = np.floor(points / cell).astype(np.int64)
    keys -= keys.min(axis=0) - 1
    dims = keys.max(axis=0) + 2
    linear = (keys[:, 0] * dims[1] + keys[:, 1]) * dims[2] + keys[:, 2]
    order = np.argsort(linear, kind="stable")
    linear, pts = linear[order], points[order]
    best = np.inf
    for dx, dy, dz in itertools.product((-1, 0, 1), repeat=3):
        neighbour = linear + (dx * dims[1] + dy) * dims[2] + dz
        lo = np.searchsorted(linear, neighbour, "left")
        count = np.searchsorted(linear, neighbour, "right") - lo
        for j in range(int(count.max(initial=0))):
            src = np.nonzero(count > j)[0]
            dst = lo[src] + j
            keep = src != dst
            if np.any(keep):
                d = np.linalg.norm(pts[src[keep]] - pts[dst[keep]], axis=1)
                best = min(best, float(d.min()))
    return best


def test_min_pair_distance_finds_duplicates_and_near_pairs() -> None:
    """The checker itself: a duplicate gives 0, a pair 0.3 apart gives 0.3."""
    grid = np.stack(np.meshgrid(*[np.arange(5.0)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    assert min_pair_distance(grid, 0.5) >= 0.5
    assert min_pair_distance(np.vstack([grid, grid[17]]), 0.5) == 0.0
    assert min_pair_distance(np.vstack([grid, grid[17] + [0.0, 0.3, 0.0]]), 0.5) == (
        pytest.approx(0.3)
    )


def assert_no_close_pairs(scene: Scene, dp: float) -> None:
    """No two particles closer than dp/2 (duplicates at edges/corners would be 0 apart)."""
    assert min_pair_distance(scene.position, 0.5 * dp) >= 0.5 * dp * (1.0 - 1e-9)


def seed(layers: int) -> Config:
    """The seed case with the given number of wall layers."""
    return load_config(SEED, [f"tank.wall_layers={layers}"])


@pytest.fixture(scope="module")
def seed_scene() -> Scene:
    """The seed case as shipped (one wall layer)."""
    return build_scene(load_config(SEED))


# -- counts ---------------------------------------------------------------------------------


def test_seed_case_fluid_count(seed_scene: Scene) -> None:
    """cases.md section 1: 47 x 78 x 35 = 128,310 fluid particles, about 171k in all."""
    assert seed_scene.count(FLUID) == 47 * 78 * 35 == 128_310
    assert 165_000 < len(seed_scene) < 175_000


def test_seed_case_obstacle_count(seed_scene: Scene) -> None:
    """A one-layer shell on a 15 x 15 x 54 lattice, without the bottom layer (the floor's)."""
    assert seed_scene.count(OBSTACLE) == 15 * 15 * 54 - 13 * 13 * 52 - 15 * 15


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_seed_case_fluid_count_does_not_depend_on_wall_layers(layers: int) -> None:
    scene = build_scene(seed(layers))
    assert scene.count(FLUID) == 128_310


def test_scene_arrays_and_kind_order(seed_scene: Scene) -> None:
    s = seed_scene
    assert s.position.dtype == np.float64 and s.position.shape == (len(s), 3)
    assert s.kind.dtype == np.int32 and s.kind.shape == (len(s),)
    assert np.all(np.diff(s.kind) >= 0), "order must be fluid, wall, obstacle"
    assert s.count(FLUID) + s.count(WALL) + s.count(OBSTACLE) == len(s)
    assert s.counts() == {k.name: s.count(k) for k in (FLUID, WALL, OBSTACLE)}


# -- no duplicates --------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_have_no_close_pairs(path: Path) -> None:
    cfg = load_config(path)
    assert_no_close_pairs(build_scene(cfg), cfg.dp)


@pytest.mark.parametrize("layers", [2, 3])
def test_seed_with_more_layers_has_no_close_pairs(layers: int) -> None:
    cfg = seed(layers)
    assert_no_close_pairs(build_scene(cfg), cfg.dp)


def test_closed_tank_has_no_close_pairs_and_a_lid() -> None:
    """An obstacle reaching the lid: its top layer is left to the lid's particles."""
    cfg = loads_config(
        (ROOT / "configs" / "quick.toml").read_text().replace("0.45]", "0.4]"),
        overrides=("tank.open_top=false", "tank.wall_layers=2", "particles.dp=0.0085"),
    )
    scene = build_scene(cfg)
    assert_no_close_pairs(scene, cfg.dp)
    z = scene.position[scene.kind == WALL, 2]
    top = cfg.tank.box.max[2]
    assert np.sum(np.isclose(z, top + cfg.dp)) > 0  # the second lid layer
    assert z.max() == pytest.approx(top + cfg.dp)


# -- walls ----------------------------------------------------------------------------------


def test_face_lattice_covers_both_ends() -> None:
    for lo, hi, dp in [(0.0, 1.6, 0.0085), (0.0, 1.0, 0.05), (-0.3, 0.67, 0.04), (0.9, 1.02, 0.04)]:
        x = face_lattice(lo, hi, dp, tol=1e-12)
        assert x[0] == lo and x[-1] == hi
        gaps = np.diff(x)
        assert np.all(gaps >= 0.5 * dp - 1e-12) and np.all(gaps < 1.5 * dp)
        assert np.allclose(gaps[:-1], dp)


@pytest.mark.parametrize("layers", [1, 3])
def test_walls_lie_on_the_tank_faces(layers: int) -> None:
    """The innermost layer is exactly on every inner face (also the 1.6 x 0.67 x 0.4 tank,
    which is not a multiple of dp), layers go outward at dp, and an open top has no lid."""
    cfg = seed(layers)
    dp = cfg.dp
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    scene = build_scene(cfg)
    wall = scene.position[scene.kind == WALL]
    tol = 1e-12
    # nothing inside the tank, nothing above the open top, nothing beyond the last layer
    inside = np.all((wall > lo + tol) & (wall < hi - tol), axis=1)
    assert not np.any(inside)
    assert wall[:, 2].max() == hi[2]
    assert np.all(wall >= lo - (layers - 1) * dp - tol)
    assert np.all(wall[:, :2] <= hi[:2] + (layers - 1) * dp + tol)
    faces = [(a, lo[a]) for a in range(3)] + [(0, hi[0]), (1, hi[1])]
    for axis, plane in faces:
        on_face = wall[wall[:, axis] == plane]
        others = [b for b in range(3) if b != axis]
        for b in others:
            coords = np.unique(on_face[:, b])
            inner = coords[(coords >= lo[b]) & (coords <= hi[b])]
            assert inner[0] == lo[b] and inner[-1] == hi[b], (axis, plane, b)
            gaps = np.diff(inner)
            assert np.all(gaps >= 0.5 * dp - tol) and np.all(gaps < 1.5 * dp)
        # full face coverage: every lattice line of the face is filled
        n_b = [len(np.unique(on_face[:, b])) for b in others]
        assert len(on_face) == n_b[0] * n_b[1]
    # layer spacing outward from the floor
    floor_levels = np.unique(wall[wall[:, 2] <= lo[2], 2])
    assert np.allclose(floor_levels, lo[2] - dp * np.arange(layers)[::-1])


def test_wall_count_seed_one_layer(seed_scene: Scene) -> None:
    """Floor 189 x 80, ends 2 x 80 x 47, sides 2 x 187 x 47 (lattice lines per face)."""
    assert seed_scene.count(WALL) == 189 * 80 + 2 * 80 * 47 + 2 * 187 * 47


# -- fluid ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_fluid_inside_tank_blocks_and_clear_of_obstacles(path: Path) -> None:
    cfg = load_config(path)
    dp = cfg.dp
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    tol = 1e-9
    assert np.all(fluid >= lo + 0.5 * dp - tol) and np.all(fluid <= hi - 0.5 * dp + tol)
    in_a_block = np.zeros(len(fluid), dtype=bool)
    for block in cfg.fluid_blocks:
        bmin, bmax = np.array(block.min), np.array(block.max)
        in_a_block |= np.all((fluid > bmin - tol) & (fluid <= bmax + tol), axis=1)
    assert np.all(in_a_block)
    # on the lattice anchored at the tank's min corner
    steps = (fluid - lo) / dp
    assert np.allclose(steps, np.round(steps), atol=1e-6)
    for obstacle in cfg.obstacles:
        omin, omax = np.array(obstacle.box.min), np.array(obstacle.box.max)
        gap = np.maximum(np.maximum(omin - fluid, fluid - omax), 0.0)
        assert np.all(np.linalg.norm(gap, axis=1) >= 0.5 * dp - tol)


def test_touching_fluid_blocks_fill_the_lattice_once() -> None:
    base = BOX_CASE.format(layers=1, hollow="false").replace(
        "max = [0.2, 1.0, 0.2]", "max = [0.1, 1.0, 0.2]"
    )
    one = build_scene(loads_config(base))
    extra = "[[fluid]]\nmin = [0.1, 0.0, 0.0]\nmax = [0.2, 1.0, 0.2]\n"
    two = build_scene(loads_config(base + extra))
    assert one.count(FLUID) == 2 * 19 * 4
    assert two.count(FLUID) == 4 * 19 * 4
    assert_no_close_pairs(two, 0.05)


def test_fluid_is_kept_out_of_an_obstacle() -> None:
    text = BOX_CASE.format(layers=1, hollow="true").replace(
        "max = [0.2, 1.0, 0.2]", "max = [1.0, 1.0, 0.2]"
    )
    text = text.replace("min = [0.5, 0.35, 0.4]", "min = [0.5, 0.35, 0.0]")
    scene = build_scene(loads_config(text))
    fluid = scene.position[scene.kind == FLUID]
    # x in 0.5..0.8, y in 0.35..0.65 is the obstacle: fluid stays >= dp/2 from it
    near = (fluid[:, 0] > 0.475) & (fluid[:, 0] < 0.825) & (fluid[:, 1] > 0.325)
    near &= fluid[:, 1] < 0.675
    assert not np.any(near)
    assert scene.count(FLUID) == 19 * 19 * 4 - 7 * 7 * 4


# -- obstacles ------------------------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 2])
def test_obstacle_hollow_and_solid_counts(layers: int) -> None:
    solid = build_scene(loads_config(BOX_CASE.format(layers=layers, hollow="false")))
    hollow = build_scene(loads_config(BOX_CASE.format(layers=layers, hollow="true")))
    n = 7
    assert solid.count(OBSTACLE) == n**3
    assert hollow.count(OBSTACLE) == n**3 - (n - 2 * layers) ** 3
    assert solid.count(FLUID) == hollow.count(FLUID)
    assert_no_close_pairs(hollow, 0.05)


def test_obstacle_faces_are_exact_when_not_a_multiple_of_dp(seed_scene: Scene) -> None:
    cfg = load_config(SEED)
    ob = seed_scene.position[seed_scene.kind == OBSTACLE]
    box = cfg.obstacles[0].box
    for a in range(3):
        assert ob[:, a].max() == box.max[a]
    assert ob[:, 0].min() == box.min[0] and ob[:, 1].min() == box.min[1]
    # the bottom layer would sit on the floor's particles: the floor carries it
    assert ob[:, 2].min() == pytest.approx(box.min[2] + cfg.dp)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_particle_count_bound_without_building(path: Path) -> None:
    """The count the memory check uses: never below the scene, within 1 % of it."""
    cfg = load_config(path)
    built = len(build_scene(cfg))
    assert built <= particle_count_bound(cfg) <= 1.01 * built


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("hollow", ["true", "false"])
def test_particle_count_is_exact_for_a_floating_obstacle(layers: int, hollow: str) -> None:
    cfg = loads_config(BOX_CASE.format(layers=layers, hollow=hollow))
    assert particle_count_bound(cfg) == len(build_scene(cfg))
