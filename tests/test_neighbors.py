"""The cell list against a brute-force search: same neighbour sets, deterministic order."""

from pathlib import Path

import numpy as np
import pytest
import taichi as ti

from solver.config import load_config
from solver.neighbors import (
    BLOCKS,
    GPU_X_REFINEMENT,
    MAX_KEYS,
    CellGrid,
    count_neighbours,
    default_x_refinement,
    grid_dims,
)
from solver.selftest.blocks import (
    MAX_NEIGHBOURS,
    brute_force_neighbours,
    collect_neighbours,
    grid_neighbours,
    neighbour_set_errors,
)
from solver.simulation import Simulation


def _assert_same_sets(grid_sets, brute_sets, points, radius):
    """Equal sets, except pairs within float32 rounding of the support radius."""
    assert neighbour_set_errors(grid_sets, brute_sets, points, radius) == []


@pytest.mark.parametrize(
    ("cells_per_support", "x_refinement"), [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (3, 3)]
)
def test_random_positions_matchbrute_force_neighbours(on_backend, cells_per_support, x_refinement):
    rng = np.random.default_rng(0)
    points = rng.random((3000, 3)) * [1.0, 0.6, 0.4]
    sets, _, _ = grid_neighbours(
        points, (0, 0, 0), (1.0, 0.6, 0.4), 0.07, cells_per_support=cells_per_support,
        x_refinement=x_refinement,
    )  # fmt: skip
    _assert_same_sets(sets, brute_force_neighbours(points, 0.07, np.ones(3000, bool)), points, 0.07)


@pytest.mark.parametrize("cells_per_support", [2, 3])
def test_lattice_on_cell_faces_and_domain_edges_matchbrute_force_neighbours(
    on_backend, cells_per_support
):
    # Spacing equal to the cell size: particles sit on cell faces and on the domain's faces.
    radius = 0.05
    axis = np.arange(0, 11) * (radius / cells_per_support)
    points = np.stack(np.meshgrid(axis, axis, axis[:7], indexing="ij"), -1).reshape(-1, 3)
    sets, _, _ = grid_neighbours(
        points, (0, 0, 0), (axis[-1],) * 3, radius * 1.0000001,
        cells_per_support=cells_per_support,
    )  # fmt: skip
    brute = brute_force_neighbours(points, radius * 1.0000001, np.ones(len(points), bool))
    _assert_same_sets(sets, brute, points, radius)


def test_particles_outside_domain_and_nan_are_safe(on_backend):
    rng = np.random.default_rng(5)
    points = rng.random((800, 3)) * 3.0 - 1.0  # many outside [0, 1]^3
    points[:5] = [[-50, 0, 0], [1e9, 1e9, -1e9], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [0, 0, 0]]
    sets, _, _ = grid_neighbours(points, (0, 0, 0), (1, 1, 1), 0.2)
    _assert_same_sets(sets, brute_force_neighbours(points, 0.2, np.ones(800, bool)), points, 0.2)


def test_removed_particles_are_dropped_and_order_is_by_cell_then_id(on_backend):
    rng = np.random.default_rng(9)
    points = rng.random((2000, 3))
    removed = rng.random(2000) < 0.1
    sets, order, grid = grid_neighbours(points, (0, 0, 0), (1, 1, 1), 0.1, removed)
    assert len(order) == (~removed).sum()
    assert not removed[order].any()
    _assert_same_sets(sets, brute_force_neighbours(points, 0.1, ~removed), points, 0.1)
    sizes = grid.cell_sizes.astype(np.float32)
    cells = np.clip(np.floor(points[order].astype(np.float32) / sizes), 0, grid.dims - 1)
    keys = (cells[:, 2] * grid.dims[1] + cells[:, 1]) * grid.dims[0] + cells[:, 0]
    expected = np.lexsort((order, keys))
    np.testing.assert_array_equal(expected, np.arange(len(order)))


def test_groups_file_the_fluid_block_first(on_backend):
    """Group 0 (the fluid) comes first, sorted by (cell, id), then every other group by (cell,
    id); cell_offsets[num_cells] is the live fluid count, and the neighbours found through
    both blocks are the brute-force ones."""
    rng = np.random.default_rng(13)
    points = rng.random((2500, 3)) * [1.0, 0.6, 0.4]
    groups = rng.integers(0, 3, 2500)  # fluid, wall, obstacle
    removed = rng.random(2500) < 0.05
    sets, order, grid = grid_neighbours(points, (0, 0, 0), (1.0, 0.6, 0.4), 0.07, removed, groups)
    _assert_same_sets(sets, brute_force_neighbours(points, 0.07, ~removed), points, 0.07)
    fluid = int(((groups == 0) & ~removed).sum())
    assert 0 < fluid < len(order)
    assert (groups[order[:fluid]] == 0).all() and (groups[order[fluid:]] != 0).all()
    offsets = grid.cell_offsets.to_numpy()
    assert len(offsets) == 2 * grid.num_cells + 1
    assert offsets[grid.num_cells] == fluid and offsets[-1] == len(order)
    sizes = grid.cell_sizes.astype(np.float32)
    cells = np.clip(np.floor(points[order].astype(np.float32) / sizes), 0, grid.dims - 1)
    keys = (cells[:, 2] * grid.dims[1] + cells[:, 1]) * grid.dims[0] + cells[:, 0]
    keys += grid.num_cells * (groups[order] != 0)
    np.testing.assert_array_equal(np.lexsort((order, keys)), np.arange(len(order)))
    filed = np.searchsorted(offsets, np.arange(len(order)), "right") - 1
    np.testing.assert_array_equal(filed, keys)


def test_all_particles_in_one_cell(on_backend):
    points = np.full((500, 3), 0.55) + np.random.default_rng(2).random((500, 3)) * 1e-3
    sets, order, _ = grid_neighbours(points, (0, 0, 0), (1, 1, 1), 0.1)
    np.testing.assert_array_equal(order, np.arange(500))
    assert all(len(s) == 499 for s in sets.values())


def test_update_is_bitwise_repeatable(on_backend):
    points = np.random.default_rng(4).random((20_000, 3))
    _, first, _ = grid_neighbours(points, (0, 0, 0), (1, 1, 1), 0.05)
    _, second, _ = grid_neighbours(points, (0, 0, 0), (1, 1, 1), 0.05)
    np.testing.assert_array_equal(first, second)


def test_grid_rejects_bad_boxes():
    with pytest.raises(ValueError):
        CellGrid((0, 0, 0), (1, 0, 1), 0.1, 10)


def test_search_beyond_the_support_finds_neighbours_that_moved_since_the_sort(on_backend):
    """Between sorts a particle may have left the cell it was filed in; a search reaching
    `skin` further finds it as long as it moved less than the skin. Particle j is filed at
    x = 0.605 (cell 12 of 0.05), then moves to 0.59, within the support 0.1 of i at 0.498:
    a search of radius 0.1 around i stops at cell 11 and misses j, one of 0.12 finds it."""
    points = np.array([[0.498, 0.5, 0.5], [0.605, 0.5, 0.5]])
    grid = CellGrid((0, 0, 0), (1, 1, 1), 0.1, 2)
    position = ti.Vector.ndarray(3, ti.f32, shape=2)
    position.from_numpy(points.astype(np.float32))
    ids = ti.ndarray(ti.i32, shape=2)
    ids.from_numpy(np.arange(2, dtype=np.int32))
    flags = ti.ndarray(ti.i32, shape=2)
    flags.fill(0)
    assert grid.update(position, ids, flags, 2) == 2
    np.testing.assert_array_equal(grid.order.to_numpy(), [0, 1])
    moved = points.copy()
    moved[1, 0] = 0.59
    position.from_numpy(moved.astype(np.float32))
    lo, inv_cell, dims, offsets = grid.kernel_args()
    found = []
    for search in (0.1, 0.12):
        neighbours = ti.ndarray(ti.i32, shape=(2, MAX_NEIGHBOURS))
        counts = ti.ndarray(ti.i32, shape=2)
        args = (lo, inv_cell, dims, offsets, neighbours, counts)
        collect_neighbours(position, 2, 0.1, search, *args)
        found.append(int(counts.to_numpy()[0]))
    assert found == [0, 1]


def test_neighbour_count_matches_brute_force(on_backend):
    """count_neighbours (the pair count of the benchmarks' PIPS) equals the brute-force number
    of live particles within the radius, 0 for a removed particle, searching a wider radius
    (a neighbour skin) without counting the pairs beyond the radius."""
    rng = np.random.default_rng(21)
    n, radius = 2500, 0.08
    points = (rng.random((n, 3)) * [1.0, 0.6, 0.4]).astype(np.float32)
    removed = (rng.random(n) < 0.1).astype(np.int32)
    grid = CellGrid((0, 0, 0), (1.0, 0.6, 0.4), radius, n)
    position = ti.Vector.ndarray(3, ti.f32, shape=n)
    position.from_numpy(points)
    ids = ti.ndarray(ti.i32, shape=n)
    ids.from_numpy(np.arange(n, dtype=np.int32))
    flags = ti.ndarray(ti.i32, shape=n)
    flags.from_numpy(removed)
    kept = grid.update(position, ids, flags, n)
    order = grid.order.to_numpy()[:kept]
    position.from_numpy(np.concatenate([points[order], np.zeros((n - kept, 3), np.float32)]))
    flags.from_numpy(np.zeros(n, np.int32))
    counts = ti.ndarray(ti.f32, shape=n)
    lo, inv_cell, dims, offsets = grid.kernel_args()
    count_neighbours(
        position, flags, kept, radius, 1.1 * radius, lo, inv_cell, dims, offsets, counts
    )
    brute = brute_force_neighbours(points, radius, removed == 0)
    expected = np.array([len(brute[int(i)]) for i in order])
    got = counts.to_numpy()[:kept]
    assert np.abs(got - expected).max() <= 1  # a pair within float32 rounding of the radius
    assert (got != expected).sum() <= 2
    assert expected.mean() > 5  # dense enough to be a real check


def test_cells_thinner_along_x_change_only_the_order_of_the_sums(on_backend):
    """`neighbors.x_refinement` = 3 finds every neighbour a cubic grid finds (the brute-force
    tests above), only in another order within each row: 0.1 s of the quick dam break with
    the GPUs' neighbour settings agree with cubic cells to float32 rounding grown over 250
    steps (measured: 2e-5 dp, 3e-5 m/s, 1e-5 of the density), particle by id."""
    quick = Path(__file__).resolve().parents[1] / "configs" / "quick.toml"
    gpu_like = [
        "neighbors.cells_per_support=3", "neighbors.skin=0.1", "neighbors.pair_halves=false"
    ]  # fmt: skip
    runs = []
    for refinement in (1, 3):
        sim = Simulation(load_config(quick, [*gpu_like, f"neighbors.x_refinement={refinement}"]))
        width, across, _ = sim.grid.cell_sizes
        assert width * refinement == pytest.approx(across)
        while sim.time < 0.1:
            sim.advance(0.1)
        snap = sim.snapshot()
        order = np.argsort(snap.id)
        runs.append((snap.position[order], snap.velocity[order], snap.density[order]))
    (x1, v1, rho1), (x3, v3, rho3) = runs
    assert not np.array_equal(x3, x1)  # the order of the sums did change
    np.testing.assert_allclose(x3, x1, rtol=0, atol=1e-4 * sim.cfg.dp)
    np.testing.assert_allclose(v3, v1, rtol=0, atol=1e-4)
    np.testing.assert_allclose(rho3, rho1, rtol=1e-4, atol=0)


def test_gpus_thin_the_cells_along_x_only_while_the_keys_fit_32_bits():
    """The GPUs' default x refinement is GPU_X_REFINEMENT, or the largest below it whose grid's
    keys fit 32-bit indices; the CPU's is 1. A unit cube in cells 1/900 across: 7.29e8 cubic
    cells (1.46e9 keys) fit, twice as many do not; 0.7 of the cube fits twice as many."""
    lo, hi, support = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 3.0 / 900
    assert GPU_X_REFINEMENT >= 2
    assert default_x_refinement(False, lo, hi, 1.0, 3) == GPU_X_REFINEMENT
    assert default_x_refinement(True, lo, hi, 1.0, 3) == 1
    assert default_x_refinement(False, lo, hi, support, 3) == 1
    keys = {x: BLOCKS * np.prod(grid_dims(lo, hi, support, 3, x)) for x in (1, 2)}
    assert keys[1] < MAX_KEYS <= keys[2]
    assert default_x_refinement(False, lo, (1.0, 1.0, 0.7), support, 3) == 2
