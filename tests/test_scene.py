"""The initial particle lattice: counts of the reference cases, boundary layers on the surfaces
(DBC) or dp/2 behind them (mDBC), fluid clear of walls and obstacles, no two particles closer than
dp/2, and mDBC's ghost nodes (each boundary particle's mirror image through the surface, English
et al. 2022, Comput. Part. Mech. 9, 1-15). No Taichi needed."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from solver.config import Config, ConfigError, fitted_block_axes, load_config, loads_config
from solver.particle_kind import ParticleKind
from solver.scene import (
    Scene,
    build_scene,
    face_lattice,
    lattice_mismatches,
    particle_count_bound,
)
from solver.surface_distance import nearest_on_surface

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
SEED = ROOT / "configs" / "dambreak.toml"
FLUID, WALL, OBSTACLE = ParticleKind.FLUID, ParticleKind.WALL, ParticleKind.OBSTACLE
BOUNDARIES = ("mdbc", "dbc")
GAP = {"mdbc": 0.5, "dbc": 0.0}
"""Where the surface lies beyond the innermost boundary layer, in dp (English et al. 2022)."""
DBC = ("physics.boundary=dbc",)
DP_LATTICE = "particles.fluid_lattice=dp"
"""The override that puts a shipped case's water back on the dp lattice (spheric_test2 fits
its block)."""
COARSE = {"dambreak_houses": ("particles.dp=0.02",)}
"""Overrides that keep the shipped cases built here small (the houses case is a GPU case)."""


def shipped(path: Path, boundary: str) -> Config:
    """A shipped case (coarsened where COARSE says) with the given boundary method."""
    return load_config(path, [*COARSE.get(path.stem, ()), f"physics.boundary={boundary}"])


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


def seed(layers: int, boundary: str = "mdbc") -> Config:
    """The seed case with the given number of wall layers and boundary method."""
    return load_config(SEED, [f"tank.wall_layers={layers}", f"physics.boundary={boundary}"])


@pytest.fixture(scope="module")
def seed_scene() -> Scene:
    """The seed case with one wall layer under mDBC (shipped: three layers)."""
    return build_scene(seed(1))


@pytest.fixture(scope="module")
def seed_dbc_scene() -> Scene:
    """The seed case with DBC and one wall layer: OpenFPM's layout, 171,665 particles."""
    return build_scene(seed(1, "dbc"))


def test_shipped_seed_case_count() -> None:
    """As shipped (mDBC, three wall layers covering the support): 263,784 particles, the
    same 128,310 fluid particles as OpenFPM's."""
    scene = build_scene(load_config(SEED))
    assert (len(scene), scene.count(FLUID)) == (263_784, 128_310)


# -- counts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("boundary", "total"), [("dbc", 171_665), ("mdbc", 172_568)])
def test_seed_case_counts(boundary: str, total: int) -> None:
    """cases.md section 1: 47 x 78 x 35 = 128,310 fluid particles under both methods (the cell
    centres of mDBC fit as many as DBC's lattice on these block sizes); 171,665 in all with DBC,
    OpenFPM's count, for comparison with it."""
    scene = build_scene(seed(1, boundary))
    assert scene.count(FLUID) == 47 * 78 * 35 == 128_310
    assert len(scene) == total


def test_seed_case_obstacle_count(seed_dbc_scene: Scene) -> None:
    """DBC: a one-layer shell on a 15 x 15 x 54 lattice, without the bottom layer (the floor's)."""
    assert seed_dbc_scene.count(OBSTACLE) == 15 * 15 * 54 - 13 * 13 * 52 - 15 * 15


def test_seed_case_obstacle_count_mdbc(seed_scene: Scene) -> None:
    """mDBC: a one-layer shell on the box shrunk by dp/2 (14 x 14 x 53 lattice), bottom layer
    kept: it lies dp/2 above the floor surface, dp above the floor's particles."""
    assert seed_scene.count(OBSTACLE) == 14 * 14 * 53 - 12 * 12 * 51


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_seed_case_fluid_count_does_not_depend_on_wall_layers(layers: int, boundary: str) -> None:
    scene = build_scene(seed(layers, boundary))
    assert scene.count(FLUID) == 128_310


def test_spheric_test2_fluid_on_cell_centres() -> None:
    """On the dp lattice mDBC fluid fills the cell centres tank.min + (i + 1/2) dp of the block
    (1.992, 3.22] x (0, 1] x (0, 0.55]: x 2.01..3.21, y 0.01..0.99, z 0.01..0.55, 61 x 50 x 28
    particles (the shipped config fits the block instead: tests/test_fitted_lattice.py)."""
    cfg = load_config(ROOT / "configs" / "spheric_test2.toml", [DP_LATTICE])
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    assert len(fluid) == 61 * 50 * 28 == 85_400
    assert fluid.min(axis=0) == pytest.approx([2.01, 0.01, 0.01], abs=1e-12)
    assert fluid.max(axis=0) == pytest.approx([3.21, 0.99, 0.55], abs=1e-12)


def test_lattice_mismatches_name_the_blocks_the_lattice_cannot_fill() -> None:
    """SPHERIC test 2's reservoir, 1.228 x 1 x 0.55 m: at dp 0.02 its depth is 27.5 dp and its
    length 61.4 dp, so the lattice builds 0.56 m of water from x = 2.00 (both noted, y fits);
    at dp 0.01 the depth is 55 dp and the built length starts 0.2 dp from the block's, under
    the dp/4 that is noted, so nothing is. Under DBC the water
    keeps dp/2 from the wall layer, which is no mismatch: the seed case's OpenFPM variant
    notes only its x end (0.4 m = 46.56 dp), not the floor or the walls it stands on."""
    spheric = ROOT / "configs" / "spheric_test2.toml"
    assert lattice_mismatches(load_config(spheric)) == []  # shipped: the fitted lattice
    notes = lattice_mismatches(load_config(spheric, [DP_LATTICE]))
    assert len(notes) == 2
    assert "fluid[0] along x is built as 61 layers" in notes[0] and "[2, 3.22] m" in notes[0]
    assert "fluid[0] along z is built as 28 layers of dp = 0.02 m, [0, 0.56] m" in notes[1]
    assert "[0, 0.55] m (0.55 m = 27.5 dp)" in notes[1]
    assert lattice_mismatches(load_config(spheric, [DP_LATTICE, "particles.dp=0.01"])) == []
    openfpm = lattice_mismatches(seed(1, "dbc"))
    assert [n.split(" is built")[0].split(": ")[-1] for n in openfpm] == ["fluid[0] along x"]


def test_scene_arrays_and_kind_order(seed_scene: Scene) -> None:
    s = seed_scene
    assert s.position.dtype == np.float64 and s.position.shape == (len(s), 3)
    assert s.kind.dtype == np.int32 and s.kind.shape == (len(s),)
    assert s.ghost.dtype == np.float64 and s.ghost.shape == (len(s), 3)
    assert np.all(np.diff(s.kind) >= 0), "order must be fluid, wall, obstacle"
    assert s.count(FLUID) + s.count(WALL) + s.count(OBSTACLE) == len(s)
    assert s.counts() == {k.name: s.count(k) for k in (FLUID, WALL, OBSTACLE)}


# -- DBC is the layout it was ---------------------------------------------------------------

#: Particle count and the first 16 hex digits of sha256(position bytes + kind bytes) of each
#: shipped case under DBC, from the scene code before mDBC placement was added (commit 5fc567c):
#: DBC must keep its layout bit for bit (the seed case is compared with OpenFPM's 171,665).
#: The configs then had one wall layer (dambreak) and two (quick), given here as overrides.
#: dambreak_houses (a mesh obstacle) was recorded when it was added, at its COARSE dp.
DBC_SCENES = {
    "column_collapse": ((), 94_425, "0ee9302e460baff4"),
    "dambreak": (("tank.wall_layers=1",), 171_665, "6118dcef6c9bbaf0"),
    "quick": (("tank.wall_layers=2",), 5_376, "ef8d79306fb9c0f8"),
    "spheric_test2": ((DP_LATTICE,), 174_105, "1dfffdfeca681f65"),
    "dambreak_houses": (COARSE["dambreak_houses"], 34_557, "c77f65032ab71b27"),
}


def scene_digest(scene: Scene) -> str:
    """A fingerprint of the exact positions and kinds."""
    return hashlib.sha256(scene.position.tobytes() + scene.kind.tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_dbc_scene_is_bitwise_unchanged(path: Path) -> None:
    """DBC positions and kinds are exactly what the pre-mDBC code produced; no ghosts."""
    overrides, count, digest = DBC_SCENES[path.stem]
    scene = build_scene(load_config(path, [*DBC, *overrides]))
    assert (len(scene), scene_digest(scene)) == (count, digest)
    assert not np.any(scene.ghost)


# -- no duplicates --------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_have_no_close_pairs(path: Path, boundary: str) -> None:
    cfg = shipped(path, boundary)
    assert_no_close_pairs(build_scene(cfg), cfg.dp)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("layers", [2, 3])
def test_seed_with_more_layers_has_no_close_pairs(layers: int, boundary: str) -> None:
    cfg = seed(layers, boundary)
    assert_no_close_pairs(build_scene(cfg), cfg.dp)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_closed_tank_has_no_close_pairs_and_a_lid(boundary: str) -> None:
    """An obstacle reaching the lid: under DBC its top layer is left to the lid's particles."""
    cfg = loads_config(
        (ROOT / "configs" / "quick.toml").read_text().replace("0.45]", "0.4]"),
        overrides=(
            "tank.open_top=false",
            "tank.wall_layers=2",
            "particles.dp=0.0085",
            f"physics.boundary={boundary}",
        ),
    )
    scene = build_scene(cfg)
    assert_no_close_pairs(scene, cfg.dp)
    z = scene.position[scene.kind == WALL, 2]
    top = cfg.tank.box.max[2] + GAP[boundary] * cfg.dp  # where the innermost lid layer lies
    assert np.sum(np.isclose(z, top + cfg.dp)) > 0  # the second lid layer
    assert z.max() == pytest.approx(top + cfg.dp)


# -- walls ----------------------------------------------------------------------------------


def test_even_face_lattice_has_no_gap_wider_than_dp() -> None:
    """The tank walls' lattice under mDBC (`even`): the same points as the classic lattice,
    spread evenly, so every gap is within dp / (2 n) of dp (no hole like the classic lattice's
    last gap of 1.33 dp across SPHERIC test 2's tank at dp 0.0075); a length that is a
    multiple of dp keeps the classic lattice bit for bit."""
    for lo, hi, dp in [
        (-0.00375, 1.00375, 0.0075),
        (-0.00425, 1.60425, 0.0085),
        (-0.3, 0.67, 0.04),
    ]:
        classic = face_lattice(lo, hi, dp, tol=1e-12)
        x = face_lattice(lo, hi, dp, tol=1e-12, even=True)
        assert len(x) == len(classic) and x[0] == lo and x[-1] == hi
        n = len(x) - 1
        assert np.diff(classic).max() > 1.2 * dp or np.diff(classic).min() < 0.8 * dp
        assert np.allclose(np.diff(x), (hi - lo) / n) and abs((hi - lo) / n - dp) <= dp / (2 * n)
    exact = (-0.01, 3.23, 0.02)  # SPHERIC test 2's length at dp 0.02 under mDBC: 162 dp
    assert np.array_equal(face_lattice(*exact, tol=1e-9, even=True), face_lattice(*exact, tol=1e-9))


def test_face_lattice_covers_both_ends() -> None:
    for lo, hi, dp in [(0.0, 1.6, 0.0085), (0.0, 1.0, 0.05), (-0.3, 0.67, 0.04), (0.9, 1.02, 0.04)]:
        x = face_lattice(lo, hi, dp, tol=1e-12)
        assert x[0] == lo and x[-1] == hi
        gaps = np.diff(x)
        assert np.all(gaps >= 0.5 * dp - 1e-12) and np.all(gaps < 1.5 * dp)
        assert np.allclose(gaps[:-1], dp)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("layers", [1, 3])
def test_wall_layers_lie_on_their_planes(layers: int, boundary: str) -> None:
    """The innermost layer lies on the tank's inner faces (DBC) or dp/2 outside them (mDBC),
    on the tank grown by that gap (also the 1.6 x 0.67 x 0.4 tank, which is not a multiple of
    dp), covering each plane fully; layers go outward at dp, and an open top has no lid."""
    cfg = seed(layers, boundary)
    dp = cfg.dp
    g = GAP[boundary] * dp
    lo = np.array(cfg.tank.box.min) - g  # the planes of the innermost layer
    hi = np.array(cfg.tank.box.max) + g
    scene = build_scene(cfg)
    wall = scene.position[scene.kind == WALL]
    tol = 1e-12
    # nothing inside the planes, nothing above the open top, nothing beyond the last layer
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


def test_wall_count_seed_one_layer(seed_dbc_scene: Scene, seed_scene: Scene) -> None:
    """Lattice lines per face. DBC: floor 189 x 80, ends 2 x 80 x 47, sides 2 x 187 x 47.
    mDBC (tank grown by dp/2): floor 190 x 81, ends 2 x 81 x 48, sides 2 x 188 x 48."""
    assert seed_dbc_scene.count(WALL) == 189 * 80 + 2 * 80 * 47 + 2 * 187 * 47
    assert seed_scene.count(WALL) == 190 * 81 + 2 * 81 * 48 + 2 * 188 * 48


# -- fluid ----------------------------------------------------------------------------------


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_fluid_inside_tank_blocks_and_clear_of_obstacles(path: Path, boundary: str) -> None:
    cfg = shipped(path, boundary)
    dp = cfg.dp
    scene = build_scene(cfg)
    fluid = scene.position[scene.kind == FLUID]
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    tol = 1e-9
    half = 0.5 * np.array(cfg.fluid_cell)  # dp/2, or half the fitted spacing
    assert np.all(fluid >= lo + half - tol) and np.all(fluid <= hi - half + tol)
    in_a_block = np.zeros(len(fluid), dtype=bool)
    for block in cfg.fluid_blocks:
        bmin, bmax = np.array(block.min), np.array(block.max)
        in_a_block |= np.all((fluid > bmin - tol) & (fluid <= bmax + tol), axis=1)
    assert np.all(in_a_block)
    if cfg.fluid_lattice == "dp":  # on tank.min + (i + gap) dp: DBC's grid, mDBC's centres
        steps = (fluid - lo) / dp - GAP[boundary]
    else:  # on the block's fitted lattice
        first, spacing, _ = np.array(fitted_block_axes(cfg)).T
        steps = (fluid - first) / spacing
    assert np.allclose(steps, np.round(steps), atol=1e-6)
    for obstacle in cfg.obstacles:
        if obstacle.mesh is not None:  # outside the surface (the parity test's own test is
            # tests/test_mesh_geometry.py) and dp/2 from it, as float32 STL allows
            tri = obstacle.mesh.surface.triangles
            near = nearest_on_surface(fluid, tri, dp, reach=0.5 * dp).distance
            assert np.all(near >= 0.5 * dp * (1 - 1e-4))
            continue
        omin, omax = np.array(obstacle.box.min), np.array(obstacle.box.max)
        gap = np.maximum(np.maximum(omin - fluid, fluid - omax), 0.0)
        assert np.all(np.linalg.norm(gap, axis=1) >= 0.5 * dp - tol)


@pytest.mark.parametrize(("boundary", "across"), [("dbc", 19), ("mdbc", 20)])
def test_touching_fluid_blocks_fill_the_lattice_once(boundary: str, across: int) -> None:
    """Across the 1 m tank at dp = 0.05: 19 points 0.05..0.95 (DBC), 20 centres (mDBC)."""
    base = BOX_CASE.format(layers=1, hollow="false").replace(
        "max = [0.2, 1.0, 0.2]", "max = [0.1, 1.0, 0.2]"
    )
    over = (f"physics.boundary={boundary}",)
    one = build_scene(loads_config(base, overrides=over))
    extra = "[[fluid]]\nmin = [0.1, 0.0, 0.0]\nmax = [0.2, 1.0, 0.2]\n"
    two = build_scene(loads_config(base + extra, overrides=over))
    assert one.count(FLUID) == 2 * across * 4
    assert two.count(FLUID) == 4 * across * 4
    assert_no_close_pairs(two, 0.05)


@pytest.mark.parametrize(("boundary", "across", "covered"), [("dbc", 19, 7), ("mdbc", 20, 6)])
def test_fluid_is_kept_out_of_an_obstacle(boundary: str, across: int, covered: int) -> None:
    """Points less than dp/2 from the 0.3 x 0.3 obstacle are carved out: 7 x 7 columns of DBC's
    grid (0.5..0.8), 6 x 6 of mDBC's cell centres (0.525..0.775)."""
    text = BOX_CASE.format(layers=1, hollow="true").replace(
        "max = [0.2, 1.0, 0.2]", "max = [1.0, 1.0, 0.2]"
    )
    text = text.replace("min = [0.5, 0.35, 0.4]", "min = [0.5, 0.35, 0.0]")
    scene = build_scene(loads_config(text, overrides=(f"physics.boundary={boundary}",)))
    fluid = scene.position[scene.kind == FLUID]
    # x in 0.5..0.8, y in 0.35..0.65 is the obstacle: fluid stays >= dp/2 from it (mDBC's
    # centres x = 0.475 and 0.825 lie exactly dp/2 from it, up to rounding)
    t = 1e-9
    near = (fluid[:, 0] > 0.475 + t) & (fluid[:, 0] < 0.825 - t) & (fluid[:, 1] > 0.325 + t)
    near &= fluid[:, 1] < 0.675 - t
    assert not np.any(near)
    assert scene.count(FLUID) == across * across * 4 - covered * covered * 4


def test_fluid_block_check_uses_the_scene_lattice() -> None:
    """A block 0.03 m thick on the floor (dp = 0.05) holds the cell centre z = 0.025 under mDBC,
    but no point of DBC's grid (z = 0.05 is above it): the config check refuses exactly the
    blocks in which the scene would place nothing."""
    text = BOX_CASE.format(layers=1, hollow="false").replace(
        "max = [0.2, 1.0, 0.2]", "max = [0.2, 1.0, 0.03]"
    )
    scene = build_scene(loads_config(text))
    assert np.all(scene.position[scene.kind == FLUID, 2] == pytest.approx(0.025))
    with pytest.raises(ConfigError, match=r"holds no particle: on z.*tank\.min \+ i dp"):
        loads_config(text, overrides=DBC)
    with pytest.raises(ConfigError, match=r"holds no particle: on z.*\(i \+ 1/2\) dp"):
        loads_config(text.replace("0.03]", "0.02]"))


# -- obstacles ------------------------------------------------------------------------------


@pytest.mark.parametrize(("boundary", "n"), [("dbc", 7), ("mdbc", 6)])
@pytest.mark.parametrize("layers", [1, 2])
def test_obstacle_hollow_and_solid_counts(layers: int, boundary: str, n: int) -> None:
    """The 0.3 m box: 7 lattice points per axis on its faces (DBC), 6 on the box shrunk by dp/2
    (mDBC); a hollow box keeps `layers` of them on every side."""
    over = (f"physics.boundary={boundary}",)
    solid = build_scene(
        loads_config(BOX_CASE.format(layers=layers, hollow="false"), overrides=over)
    )
    hollow = build_scene(
        loads_config(BOX_CASE.format(layers=layers, hollow="true"), overrides=over)
    )
    assert solid.count(OBSTACLE) == n**3
    assert hollow.count(OBSTACLE) == n**3 - (n - 2 * layers) ** 3
    assert solid.count(FLUID) == hollow.count(FLUID)
    assert_no_close_pairs(hollow, 0.05)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_obstacle_faces_are_exact_when_not_a_multiple_of_dp(boundary: str) -> None:
    """The outermost layer lies on each face (DBC) or exactly dp/2 inside it (mDBC). Under DBC
    the bottom layer would sit on the floor's particles, so the floor carries it; under mDBC it
    lies dp/2 above the floor surface and is kept."""
    cfg = seed(1, boundary)
    scene = build_scene(cfg)
    ob = scene.position[scene.kind == OBSTACLE]
    g = GAP[boundary] * cfg.dp
    box = cfg.obstacles[0].box
    for a in range(3):
        assert ob[:, a].max() == box.max[a] - g
    assert ob[:, 0].min() == box.min[0] + g and ob[:, 1].min() == box.min[1] + g
    bottom = box.min[2] + (cfg.dp if boundary == "dbc" else g)
    assert ob[:, 2].min() == pytest.approx(bottom)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_particle_count_bound_without_building(path: Path, boundary: str) -> None:
    """The count the memory check uses: never below the scene, within 1 % of it. Under mDBC it is
    exact for these cases: no fluid block meets an obstacle and no obstacle point is dropped
    (under DBC the points of an obstacle standing on the floor are, and counted)."""
    cfg = shipped(path, boundary)
    built = len(build_scene(cfg))
    assert built <= particle_count_bound(cfg) <= 1.01 * built
    if boundary == "mdbc":
        assert particle_count_bound(cfg) == built


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("hollow", ["true", "false"])
def test_particle_count_is_exact_for_a_floating_obstacle(
    layers: int, hollow: str, boundary: str
) -> None:
    cfg = loads_config(
        BOX_CASE.format(layers=layers, hollow=hollow), overrides=(f"physics.boundary={boundary}",)
    )
    assert particle_count_bound(cfg) == len(build_scene(cfg))


# -- mDBC: surfaces and ghost nodes ---------------------------------------------------------

MDBC_CASE = """
[particles]
dp = 0.05
[tank]
min = [0.0, 0.0, 0.0]
max = [1.2, 0.8, 0.8]
wall_layers = 2
open_top = {open_top}
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.8, 0.4]
[[obstacle]]  # A: standing on the floor, solid: 4 x 4 x 4 particles
min = [0.5, 0.3, 0.0]
max = [0.7, 0.5, 0.2]
hollow = false
[[obstacle]]  # B: floating, hollow: a 6 x 7 x 6 lattice, two layers thick
min = [0.8, 0.2, 0.35]
max = [1.1, 0.55, 0.65]
hollow = true
"""
"""Every length a multiple of dp = 0.05, so every layer k lies exactly (k + 1/2) dp behind its
surface. The boxes stand more than (wall_layers - 1/2) dp apart from the walls and from each
other, farther than any ghost node reaches."""

DP = 0.05


@pytest.fixture(scope="module", params=["true", "false"], ids=["open", "closed"])
def mdbc_case(request: pytest.FixtureRequest) -> tuple[Config, Scene]:
    """The case with an open and with a closed top."""
    cfg = loads_config(MDBC_CASE.format(open_top=request.param))
    return cfg, build_scene(cfg)


def outside_tank(points: np.ndarray, cfg: Config) -> np.ndarray:
    """(n, 3) how far each point lies beyond the tank's faces on each axis, signed outward-
    positive per face side (0 where it is between them; an open top has no face above)."""
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    if cfg.tank.open_top:
        hi[2] = np.inf
    return np.maximum(np.maximum(lo - points, points - hi), 0.0)


def depth_below_faces(points: np.ndarray, box_min: tuple, box_max: tuple) -> np.ndarray:
    """(n, 3, 2) depth of each point below the min and max face of a box on each axis."""
    lo, hi = np.array(box_min), np.array(box_max)
    return np.stack([points - lo, hi - points], axis=2)


def test_mdbc_scene_counts_equal_the_bound(mdbc_case: tuple[Config, Scene]) -> None:
    cfg, scene = mdbc_case
    assert len(scene) == particle_count_bound(cfg)
    assert scene.count(OBSTACLE) == 4**3 + (6 * 7 * 6 - 2 * 3 * 2)
    assert_no_close_pairs(scene, DP)


def test_mdbc_surface_lies_midway_between_fluid_and_boundary(
    mdbc_case: tuple[Config, Scene],
) -> None:
    """The surface of mDBC lies dp/2 beyond the innermost boundary layer (English et al. 2022);
    placed by construction, it is the config's geometry: the innermost wall layer lies exactly
    dp/2 outside the tank faces, the outermost obstacle layer dp/2 inside each box face, and the
    fluid keeps at least dp/2 in front of every surface (exactly dp/2 next to the floor)."""
    cfg, scene = mdbc_case
    tol = 1e-12
    outside = outside_tank(scene.position[scene.kind == WALL], cfg)
    assert outside.max(axis=1).min() == pytest.approx(0.5 * DP, abs=tol)
    k = outside[outside > 0] / DP - 0.5  # the layer index on every axis the particle is beyond
    assert np.allclose(k, np.round(k), atol=1e-9)
    assert set(np.round(k).astype(int)) == set(range(cfg.tank.wall_layers))
    obstacle = scene.position[scene.kind == OBSTACLE]
    in_boxes = 0
    for ob in cfg.obstacles:
        inside = np.all(
            (obstacle >= np.array(ob.box.min)) & (obstacle <= np.array(ob.box.max)), axis=1
        )
        depth = depth_below_faces(obstacle[inside], ob.box.min, ob.box.max)
        assert depth.min() == pytest.approx(0.5 * DP, abs=tol)
        outermost = np.isclose(depth, 0.5 * DP, atol=tol).any(axis=0)  # (3, 2): on every face
        assert outermost.all()
        in_boxes += int(np.count_nonzero(inside))
    assert in_boxes == len(obstacle)
    fluid = scene.position[scene.kind == FLUID]
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    assert np.all(fluid - lo >= 0.5 * DP - tol) and np.all(hi - fluid >= 0.5 * DP - tol)
    assert (fluid[:, 2] - lo[2]).min() == pytest.approx(0.5 * DP, abs=tol)
    for ob in cfg.obstacles:
        gap = np.maximum(np.maximum(np.array(ob.box.min) - fluid, fluid - np.array(ob.box.max)), 0)
        assert np.linalg.norm(gap, axis=1).min() >= 0.5 * DP - tol


def test_mdbc_fluid_and_dbc_have_no_ghosts(mdbc_case: tuple[Config, Scene]) -> None:
    """Fluid particles have no ghost node; DBC (Crespo et al. 2007) uses none."""
    cfg, scene = mdbc_case
    assert not np.any(scene.ghost[scene.kind == FLUID])
    assert np.all(np.linalg.norm(scene.ghost[scene.kind != FLUID], axis=1) > 0.0)
    dbc = build_scene(loads_config(MDBC_CASE.format(open_top="true"), overrides=DBC))
    assert not np.any(dbc.ghost)


def test_mdbc_tank_face_particles_mirror_through_their_face(
    mdbc_case: tuple[Config, Scene],
) -> None:
    """A wall particle beyond one face only, in layer k, mirrors straight through that face: its
    ghost vector is perpendicular to the face, points into the tank and is (2k + 1) dp long, so
    the ghost node lies (k + 1/2) dp in front of the surface."""
    cfg, scene = mdbc_case
    wall = scene.position[scene.kind == WALL]
    ghost = scene.ghost[scene.kind == WALL]
    outside = outside_tank(wall, cfg)
    face = np.count_nonzero(outside > 0, axis=1) == 1
    assert np.count_nonzero(face) > 0.8 * len(wall)
    axis = np.argmax(outside[face], axis=1)
    rows = np.arange(np.count_nonzero(face))
    normal = np.zeros_like(ghost[face])
    centre = 0.5 * (np.array(cfg.tank.box.min) + np.array(cfg.tank.box.max))
    normal[rows, axis] = np.sign(centre - wall[face])[rows, axis]  # into the tank
    length = np.linalg.norm(ghost[face], axis=1)
    k = outside[face][rows, axis] / DP - 0.5
    assert np.allclose(ghost[face], normal * length[:, None], atol=1e-12)
    assert np.allclose(length, (2 * np.round(k) + 1) * DP, atol=1e-12)
    assert set(np.round(k).astype(int)) == set(range(cfg.tank.wall_layers))


def test_mdbc_tank_edge_and_corner_particles_mirror_diagonally(
    mdbc_case: tuple[Config, Scene],
) -> None:
    """A wall particle beyond two (three) faces mirrors through the edge (corner) point: its ghost
    vector reaches back across each of those faces by twice its distance beyond it and is zero
    along the edge. On the edge's or corner's diagonal (as deep beyond each face) the components
    are equal: the normal along the diagonal, as DualSPHysics treats corners."""
    cfg, scene = mdbc_case
    wall = scene.position[scene.kind == WALL]
    ghost = scene.ghost[scene.kind == WALL]
    outside = outside_tank(wall, cfg)
    beyond = outside > 0
    centre = 0.5 * (np.array(cfg.tank.box.min) + np.array(cfg.tank.box.max))
    for faces in (2, 3):
        region = np.count_nonzero(beyond, axis=1) == faces
        expected = np.where(beyond[region], 2.0 * outside[region], 0.0)
        expected *= np.sign(centre - wall[region])
        assert np.allclose(ghost[region], expected, atol=1e-12)
        depth = np.where(beyond[region], outside[region], np.nan)
        diagonal = np.nanmax(depth, axis=1) - np.nanmin(depth, axis=1) < 1e-12
        assert np.count_nonzero(diagonal) > 0
        magnitude = np.abs(ghost[region][diagonal])
        components = magnitude[beyond[region][diagonal]].reshape(-1, faces)
        assert np.allclose(components, components[:, :1], atol=1e-12)
    corners = np.count_nonzero(beyond, axis=1) == 3
    if cfg.tank.open_top:  # no lid: corners only at the floor
        assert np.all(wall[corners, 2] < 0.0)
    else:
        assert np.any(wall[corners, 2] > cfg.tank.box.max[2])


def test_mdbc_obstacle_particles_mirror_through_the_nearest_surface(
    mdbc_case: tuple[Config, Scene],
) -> None:
    """An obstacle particle strictly nearer one wetted face than any other mirrors straight
    through it, (2k + 1) dp for layer k; one equally deep below two (three) wetted faces, on an
    edge's (corner's) diagonal, mirrors diagonally through the edge (corner) with equal
    components. The floor is no surface of box A (it stands on it): nothing of A is mirrored
    into the floor, and its bottom layer mirrors sideways or up."""
    cfg, scene = mdbc_case
    obstacle = scene.position[scene.kind == OBSTACLE]
    ghost = scene.ghost[scene.kind == OBSTACLE]
    seen_diagonal = {2: 0, 3: 0}
    for i, ob in enumerate(cfg.obstacles):
        inside = np.all(
            (obstacle >= np.array(ob.box.min)) & (obstacle <= np.array(ob.box.max)), axis=1
        )
        x, g = obstacle[inside], ghost[inside]
        depth = depth_below_faces(x, ob.box.min, ob.box.max)
        on_floor = i == 0
        if on_floor:
            depth[:, 2, 0] = np.inf  # the floor covers A's bottom: no surface there
            assert np.all(g[:, 2] >= 0.0)
            bottom = np.isclose(x[:, 2], 0.5 * DP)
            assert np.all(g[bottom, 2] == 0.0)
        nearest = depth.min(axis=2)  # per axis
        shallowest = nearest.min(axis=1, keepdims=True)
        mirrored = np.isclose(nearest, shallowest, atol=1e-9)
        outward = np.where(depth[:, :, 0] <= depth[:, :, 1], -1.0, 1.0)
        expected = np.where(mirrored, 2.0 * nearest * outward, 0.0)
        assert np.allclose(g, expected, atol=1e-12)
        k = shallowest[:, 0] / DP - 0.5
        assert np.allclose(k, np.round(k), atol=1e-9)
        single = np.count_nonzero(mirrored, axis=1) == 1
        length = np.linalg.norm(g[single], axis=1)
        assert np.allclose(length, (2 * np.round(k[single]) + 1) * DP, atol=1e-12)
        for n in (2, 3):
            diagonal = np.count_nonzero(mirrored, axis=1) == n
            seen_diagonal[n] += int(np.count_nonzero(diagonal))
            components = np.abs(g[diagonal][mirrored[diagonal]]).reshape(-1, n)
            assert np.allclose(components, components[:, :1], atol=1e-12)
    assert seen_diagonal[2] > 0 and seen_diagonal[3] > 0


def test_mdbc_ghost_nodes_lie_in_the_fluid_region(mdbc_case: tuple[Config, Scene]) -> None:
    """Every ghost node lies in the fluid region: at least dp/2 inside the tank's faces (an open
    top has none: the side walls' top rows, which reach dp/2 above it, mirror sideways) and
    outside every obstacle box, obstacle ghosts at least dp/2 in front of their own box. The one
    exception is by construction: the floor particles under box A (which stands on the floor)
    mirror up into A, where there is no fluid; their ghosts are exactly those inside a box."""
    cfg, scene = mdbc_case
    boundary = scene.kind != FLUID
    x, node = scene.position[boundary], scene.position[boundary] + scene.ghost[boundary]
    lo, hi = np.array(cfg.tank.box.min), np.array(cfg.tank.box.max)
    if cfg.tank.open_top:
        hi[2] = np.inf
    tol = 1e-12
    assert np.all(node >= lo + 0.5 * DP - tol) and np.all(node <= hi - 0.5 * DP + tol)
    in_a_box = np.zeros(len(node), dtype=bool)
    for ob in cfg.obstacles:
        bmin, bmax = np.array(ob.box.min), np.array(ob.box.max)
        in_a_box |= np.all((node > bmin + tol) & (node < bmax - tol), axis=1)
        own = np.all((x >= bmin) & (x <= bmax), axis=1)
        gap = np.maximum(np.maximum(bmin - node[own], node[own] - bmax), 0.0)
        assert np.all(np.linalg.norm(gap, axis=1) >= 0.5 * DP - tol)
    a = cfg.obstacles[0].box
    under_a = (x[:, 2] < 0.0) & np.all(
        (x[:, :2] > np.array(a.min[:2])) & (x[:, :2] < np.array(a.max[:2])), axis=1
    )
    assert np.count_nonzero(under_a) == 4 * 4 * cfg.tank.wall_layers
    assert np.array_equal(in_a_box, under_a)
