"""The portable building blocks against numpy on the running backend: exclusive scan, bucket
sort by (key, id), gather, reductions and the cell-list neighbour search (against brute force).

Each check returns a CheckResult with the figures it measured. Integer results must match
exactly; float sums within the rounding of float32 over the data (1e-5 of sum |x|), while
minima and maxima, which involve no rounding, must match exactly. Sizes cross the chunk
boundaries of the multi-level scan and reduction (128), and the largest reach several
levels.
"""

import numpy as np
import taichi as ti

from solver.neighbors import (
    BLOCKS,
    CPU_CELLS_PER_SUPPORT,
    GPU_CELLS_PER_SUPPORT,
    CellGrid,
    block_span,
    row_cells,
    search_cells,
)
from solver.parallel.bucket_sort import BucketSort
from solver.parallel.gather import gather
from solver.parallel.reduce import Reducer
from solver.parallel.scan import ExclusiveScan
from solver.selftest.result import CheckResult

MAX_NEIGHBOURS = 512
SCAN_LENGTHS = (0, 1, 127, 128, 129, 16_385, 1_000_003)
REDUCTION_LENGTHS = (0, 1, 127, 129, 16_385, 1_000_003)


def to_device(values: np.ndarray, dtype=ti.i32) -> ti.Ndarray:
    """A 1-D ndarray holding `values` (at least one element, as Taichi needs)."""
    array = ti.ndarray(dtype, shape=max(len(values), 1))
    if len(values):
        array.from_numpy(values)
    return array


def check_scan() -> CheckResult:
    """Exclusive prefix sums of random i32 arrays equal numpy's, element for element."""
    wrong = 0
    totals_ok = True
    for n in SCAN_LENGTHS:
        values = np.random.default_rng(n).integers(-3, 1000, n).astype(np.int32)
        scan = ExclusiveScan(n)
        out = ti.ndarray(ti.i32, shape=max(n, 1))
        scan(to_device(values), out, n)
        expected = (np.cumsum(values) - values).astype(np.int32)
        wrong += int(np.count_nonzero(out.to_numpy()[:n] != expected))
        totals_ok &= int(scan.total.to_numpy()[0]) == int(values.sum())
    return CheckResult(
        "scan",
        wrong == 0 and totals_ok,
        f"{len(SCAN_LENGTHS)} lengths up to {max(SCAN_LENGTHS)}: {wrong} wrong elements, "
        f"totals {'exact' if totals_ok else 'WRONG'}",
    )


def bucket_sort(keys: np.ndarray, ids: np.ndarray, num_keys: int) -> np.ndarray:
    """The (key, id) order of the elements through BucketSort (the cell grid's sort)."""
    n = len(keys)
    sorted_keys = ti.ndarray(ti.i32, shape=max(n, 1))
    order = ti.ndarray(ti.i32, shape=max(n, 1))
    BucketSort(n, num_keys)(to_device(keys), to_device(ids), order, sorted_keys, n)
    return order.to_numpy()[:n]


def check_sort() -> CheckResult:
    """The bucket sort's order equals numpy's order by (key, id) whatever order its atomics
    took, for spread and crowded keys, and a second run gives the same order."""
    rng = np.random.default_rng(7)
    cases = [
        (rng.integers(0, 2**15, 200_001), 2**15),
        (np.full(2_000, 4321), 2**15),
        (rng.integers(0, 2, 30_001), 2),
        (rng.integers(0, 2**20, 30_001), 2**20),
        (np.array([9]), 16),
        (np.zeros(0, dtype=np.int64), 16),
    ]
    wrong = 0
    for keys, num_keys in cases:
        ids = rng.permutation(3 * len(keys))[: len(keys)].astype(np.int32)
        order = bucket_sort(keys.astype(np.int32), ids, num_keys)
        wrong += int(np.count_nonzero(order != np.lexsort((ids, keys))))
    repeat_keys = cases[0][0].astype(np.int32)
    repeat_ids = np.arange(len(repeat_keys), dtype=np.int32)[::-1].copy()
    repeatable = np.array_equal(
        bucket_sort(repeat_keys, repeat_ids, 2**15), bucket_sort(repeat_keys, repeat_ids, 2**15)
    )
    return CheckResult(
        "sort",
        wrong == 0 and repeatable,
        f"{len(cases)} key sets (2 to 2**20 buckets, 0 to 200001 keys): {wrong} positions "
        f"differ from numpy's (key, id) order; "
        f"repeat run {'identical' if repeatable else 'DIFFERENT'}",
    )


def check_gather() -> CheckResult:
    """dst[i] = src[order[i]] for scalar f32, i32 and 3-vector f32 arrays, bit for bit."""
    n = 10_007
    order = np.random.default_rng(1).permutation(n).astype(np.int32)
    scalars = np.random.default_rng(2).random(n).astype(np.float32)
    integers = np.random.default_rng(3).integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    vectors = np.random.default_rng(4).random((n, 3)).astype(np.float32)
    device_order = to_device(order)
    wrong = 0
    for values, dtype in ((scalars, ti.f32), (integers, ti.i32)):
        out = ti.ndarray(dtype, shape=n)
        gather(to_device(values, dtype), out, device_order, n)
        wrong += int(np.count_nonzero(out.to_numpy() != values[order]))
    src = ti.Vector.ndarray(3, ti.f32, shape=n)
    src.from_numpy(vectors)
    dst = ti.Vector.ndarray(3, ti.f32, shape=n)
    gather(src, dst, device_order, n)
    wrong += int(np.count_nonzero(dst.to_numpy() != vectors[order]))
    return CheckResult("gather", wrong == 0, f"f32, i32 and vec3 arrays of {n}: {wrong} wrong")


def check_reductions() -> CheckResult:
    """Sum, min and max of f32 arrays against numpy (the sum in float64), scalar and vector."""
    worst = 0.0
    exact = True
    for n in REDUCTION_LENGTHS:
        values = (np.random.default_rng(n).standard_normal(n) * 50).astype(np.float32)
        array = to_device(values, ti.f32)
        out = ti.ndarray(ti.f32, shape=3)
        reducer = Reducer(n)
        reducer.sum(array, n, out, 0)
        reducer.min(array, n, out, 1)
        reducer.max(array, n, out, 2)
        total, low, high = (float(v) for v in out.to_numpy())
        scale = max(float(np.abs(values).astype(np.float64).sum()), 1e-30)
        worst = max(worst, abs(total - float(values.astype(np.float64).sum())) / scale)
        exact &= low == float(values.min(initial=np.inf))
        exact &= high == float(values.max(initial=-np.inf))
    n = 10_007
    vectors = np.random.default_rng(5).standard_normal((n, 3)).astype(np.float32)
    device_vectors = ti.Vector.ndarray(3, ti.f32, shape=n)
    device_vectors.from_numpy(vectors)
    out = ti.Vector.ndarray(3, ti.f32, shape=2)
    reducer = Reducer(n, ti.f32, components=3)
    reducer.max(device_vectors, n, out, 0)
    reducer.min(device_vectors, n, out, 1)
    got = out.to_numpy()
    exact &= np.array_equal(got[0], vectors.max(axis=0))
    exact &= np.array_equal(got[1], vectors.min(axis=0))
    reducer.min(device_vectors, 0, out, 1)
    exact &= np.array_equal(out.to_numpy()[1], np.full(3, np.inf, np.float32))
    return CheckResult(
        "reductions",
        worst <= 1e-5 and exact,
        f"sums of 0 to {max(REDUCTION_LENGTHS)} values: worst error {worst:.2e} of sum |x| "
        f"(limit 1e-05); min/max {'exact' if exact else 'WRONG'} (scalar and vec3)",
    )


@ti.kernel
def collect_neighbours(
    position: ti.types.ndarray(ndim=1),
    n: ti.i32,
    radius: float,
    search: float,
    lo: ti.math.vec3,
    inv_cell: ti.math.vec3,
    dims: ti.math.ivec3,
    cell_offsets: ti.types.ndarray(ndim=1),
    neighbours: ti.types.ndarray(ndim=2),
    counts: ti.types.ndarray(ndim=1),
):
    """For each sorted particle i < n, the indices j of those closer than `radius`, found
    through the cell grid with search radius `search` (at most MAX_NEIGHBOURS kept; counts[i]
    is the full number)."""
    for i in range(n):
        box = search_cells(position[i], search, lo, inv_cell, dims)
        count = 0
        for cz in range(box[0, 2], box[1, 2] + 1):
            for cy in range(box[0, 1], box[1, 1] + 1):
                cells = row_cells(position[i], search, cy, cz, lo, inv_cell, dims)
                for block in ti.static(range(BLOCKS)):
                    span = block_span(cells, block, dims, cell_offsets)
                    for j in range(span[0], span[1]):
                        if j != i and (position[i] - position[j]).norm_sqr() < radius * radius:
                            if count < MAX_NEIGHBOURS:
                                neighbours[i, count] = j
                            count += 1
        counts[i] = count


def grid_neighbours(
    points: np.ndarray,
    lo,
    hi,
    radius: float,
    removed: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    cells_per_support: int = CPU_CELLS_PER_SUPPORT,
    x_refinement: int = 1,
) -> tuple[dict[int, set[int]], np.ndarray, CellGrid]:
    """Neighbour id sets through the cell grid (both blocks, `groups` as the grid's groups;
    cells of radius / cells_per_support across, x_refinement times thinner along x), the sort
    order and the grid itself."""
    n = len(points)
    grid = CellGrid(lo, hi, radius, n, cells_per_support, x_refinement)
    position = ti.Vector.ndarray(3, ti.f32, shape=n)
    position.from_numpy(points.astype(np.float32))
    ids = to_device(np.arange(n, dtype=np.int32))
    flags = to_device(np.zeros(n, np.int32) if removed is None else removed.astype(np.int32))
    group = None if groups is None else to_device(groups.astype(np.int32))
    kept = grid.update(position, ids, flags, n, group)
    order = grid.order.to_numpy()[:kept]
    sorted_position = ti.Vector.ndarray(3, ti.f32, shape=n)
    sorted_position.from_numpy(
        points.astype(np.float32)[np.concatenate([order, np.zeros(n - kept, np.int32)])]
    )
    neighbours = ti.ndarray(ti.i32, shape=(n, MAX_NEIGHBOURS))
    counts = ti.ndarray(ti.i32, shape=n)
    lo_v, inv_cell, dims, offsets = grid.kernel_args()
    collect_neighbours(
        sorted_position, kept, radius, radius, lo_v, inv_cell, dims, offsets, neighbours, counts
    )
    counts_np, lists = counts.to_numpy()[:kept], neighbours.to_numpy()[:kept]
    if counts_np.max(initial=0) > MAX_NEIGHBOURS:
        raise ValueError(f"more than {MAX_NEIGHBOURS} neighbours; use fewer, sparser points")
    sets = {int(order[i]): {int(order[j]) for j in lists[i, : counts_np[i]]} for i in range(kept)}
    return sets, order, grid


def brute_force_neighbours(
    points: np.ndarray, radius: float, keep: np.ndarray
) -> dict[int, set[int]]:
    """Neighbour id sets by testing every pair (float32 positions, as on the device)."""
    p = points.astype(np.float32).astype(np.float64)
    idx = np.flatnonzero(keep)
    d2 = ((p[idx, None, :] - p[None, idx, :]) ** 2).sum(-1)
    within = (d2 < np.float32(radius) ** 2) & ~np.eye(len(idx), dtype=bool)
    return {int(idx[a]): {int(idx[b]) for b in np.flatnonzero(within[a])} for a in range(len(idx))}


def neighbour_set_errors(
    grid_sets: dict[int, set[int]], brute_sets: dict[int, set[int]], points, radius: float
) -> list[tuple[int, int, float]]:
    """(i, j, r) of the pairs the two searches disagree on, beyond float32 rounding of the
    radius; also every particle present in one result and not the other (j = -1)."""
    errors = [(i, -1, 0.0) for i in grid_sets.keys() ^ brute_sets.keys()]
    for i in grid_sets.keys() & brute_sets.keys():
        for j in grid_sets[i] ^ brute_sets[i]:
            r = float(np.linalg.norm(points[i].astype(np.float32) - points[j].astype(np.float32)))
            if abs(r - radius) >= 1e-5 * radius:
                errors.append((i, j, r))
    return errors


def check_neighbours() -> CheckResult:
    """The cell-list search finds exactly the brute-force neighbour sets (random points, a
    tenth of them flagged as removed), and keeps its particles sorted by (cell, id), with the
    cells of the CPU and of the GPUs (solver/neighbors.py)."""
    n, radius = 3000, 0.07
    rng = np.random.default_rng(0)
    points = rng.random((n, 3)) * [1.0, 0.6, 0.4]
    removed = rng.random(n) < 0.1
    brute = brute_force_neighbours(points, radius, ~removed)
    passed = True
    found = []
    for per_support in (CPU_CELLS_PER_SUPPORT, GPU_CELLS_PER_SUPPORT):
        sets, order, grid = grid_neighbours(
            points, (0, 0, 0), (1.0, 0.6, 0.4), radius, removed, None, per_support
        )
        errors = neighbour_set_errors(sets, brute, points, radius)
        cells = np.clip(
            np.floor(points[order].astype(np.float32) / grid.cell_sizes.astype(np.float32)),
            0,
            grid.dims - 1,
        )
        keys = (cells[:, 2] * grid.dims[1] + cells[:, 1]) * grid.dims[0] + cells[:, 0]
        ordered = np.array_equal(np.lexsort((order, keys)), np.arange(len(order)))
        passed &= not errors and ordered and len(order) == int((~removed).sum())
        found.append(
            f"{per_support} cells per support: {len(errors)} differ from brute force, order by "
            f"(cell, id) {'kept' if ordered else 'BROKEN'}"
        )
    pairs = sum(len(s) for s in brute.values()) // 2
    return CheckResult(
        "neighbours",
        passed,
        f"{n} points, {int(removed.sum())} removed, {pairs} pairs; " + "; ".join(found),
    )


BLOCK_CHECKS = (check_scan, check_sort, check_gather, check_reductions, check_neighbours)
"""Every building-block check, in the order the self-test runs them."""
