"""The portable building blocks against numpy, on every backend: scan, bucket sort, gather,
reductions, and the determinism the solver relies on."""

import numpy as np
import pytest
import taichi as ti

from solver.parallel.bucket_sort import BucketSort
from solver.parallel.gather import gather
from solver.parallel.reduce import Reducer, SlotMaximum, clear_slot, merge_max
from solver.parallel.scan import ExclusiveScan, build_scan, scratch_size
from solver.parallel.spread_order import (
    SPREAD_BLOCK,
    SPREAD_LANES,
    spread_index,
    spread_length,
)

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)
SCAN_LENGTHS = [0, 1, 7, 8, 9, 31, 32, 33, 1023, 1024, 1025, 3_000_017]


def _ndarray(values: np.ndarray, dtype=ti.i32) -> ti.Ndarray:
    array = ti.ndarray(dtype, shape=max(len(values), 1))
    if len(values):
        array.from_numpy(values)
    return array


@pytest.mark.parametrize("n", SCAN_LENGTHS)
def test_exclusive_scan_matches_numpy(on_backend, n):
    rng = np.random.default_rng(n)
    values = rng.integers(-3, 1000, n).astype(np.int32)
    scan = ExclusiveScan(n)
    out = ti.ndarray(ti.i32, shape=max(n, 1))
    scan(_ndarray(values), out, n)
    expected = (np.cumsum(values) - values).astype(np.int32)
    np.testing.assert_array_equal(out.to_numpy()[:n], expected)
    assert scan.total.to_numpy()[0] == values.sum()


def test_scan_in_place_and_leaves_tail_alone(on_backend):
    values = np.arange(1, 101, dtype=np.int32)
    array = _ndarray(values)
    ExclusiveScan(100)(array, array, 60)
    got = array.to_numpy()
    np.testing.assert_array_equal(got[:60], np.cumsum(values[:60]) - values[:60])
    np.testing.assert_array_equal(got[60:], values[60:])


def _bucket_sorted(
    keys: np.ndarray, ids: np.ndarray, num_keys: int
) -> tuple[np.ndarray, np.ndarray]:
    n = len(keys)
    sorted_keys = ti.ndarray(ti.i32, shape=max(n, 1))
    order = ti.ndarray(ti.i32, shape=max(n, 1))
    BucketSort(n, num_keys)(
        _ndarray(keys.astype(np.int32)), _ndarray(ids.astype(np.int32)), order, sorted_keys, n
    )
    return sorted_keys.to_numpy()[:n], order.to_numpy()[:n]


SORT_CASES = {
    "random": lambda rng: rng.integers(0, 2**15, 200_001),
    "crowded bucket": lambda rng: np.full(3_000, 4321),
    "empty buckets": lambda rng: rng.choice([3, 17, 30000], 3_000),
    "already sorted": lambda rng: np.sort(rng.integers(0, 2**15, 70_000)),
    "reversed": lambda rng: np.sort(rng.integers(0, 2**15, 70_000))[::-1].copy(),
    "tiny": lambda rng: np.array([5, 1, 5, 0, 1]),
    "single": lambda rng: np.array([9]),
    "empty": lambda rng: np.zeros(0, dtype=np.int64),
}


@pytest.mark.parametrize("case", SORT_CASES)
def test_bucket_sort_orders_by_key_then_id(on_backend, case):
    """Whatever order the atomics place elements in, the result is the (key, id) order."""
    rng = np.random.default_rng(7)
    keys = SORT_CASES[case](rng).astype(np.int32)
    ids = rng.permutation(len(keys) * 3)[: len(keys)].astype(np.int32)  # unique, with gaps
    sorted_keys, order = _bucket_sorted(keys, ids, 2**15)
    expected = np.lexsort((ids, keys))
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(sorted_keys, keys[expected])


def test_bucket_sort_is_bitwise_repeatable(on_backend):
    keys = np.random.default_rng(3).integers(0, 300, 100_000).astype(np.int32)
    ids = np.arange(len(keys))[::-1].copy()
    first = _bucket_sorted(keys, ids, 300)
    second = _bucket_sorted(keys, ids, 300)
    np.testing.assert_array_equal(first[1], second[1])


@pytest.mark.parametrize("n", [0, 1, 127, 128, 129, 16_385])
def test_inclusive_scan_adds_each_element_to_its_own_sum(on_backend, n):
    values = np.random.default_rng(n).integers(-3, 1000, n).astype(np.int32)
    scan = build_scan(max(n, 1), inclusive=True)

    @ti.kernel
    def inclusive(values: I32Array, out: I32Array, n: ti.i32, scratch: I32Array):
        scan(values, out, n, scratch)

    out = ti.ndarray(ti.i32, shape=max(n, 1))
    inclusive(_ndarray(values), out, n, ti.ndarray(ti.i32, shape=scratch_size(max(n, 1))))
    np.testing.assert_array_equal(out.to_numpy()[:n], np.cumsum(values))


def test_gather_reorders_scalar_and_vector_arrays(on_backend):
    n = 1000
    order = np.random.default_rng(1).permutation(n).astype(np.int32)
    scalars = np.random.default_rng(2).random(n).astype(np.float32)
    vectors = np.random.default_rng(3).random((n, 3)).astype(np.float32)
    src_s, dst_s = _ndarray(scalars, ti.f32), ti.ndarray(ti.f32, shape=n)
    src_v = ti.Vector.ndarray(3, ti.f32, shape=n)
    src_v.from_numpy(vectors)
    dst_v = ti.Vector.ndarray(3, ti.f32, shape=n)
    gather(src_s, dst_s, _ndarray(order), n)
    gather(src_v, dst_v, _ndarray(order), n)
    np.testing.assert_array_equal(dst_s.to_numpy(), scalars[order])
    np.testing.assert_array_equal(dst_v.to_numpy(), vectors[order])


@pytest.mark.parametrize("n", [0, 1, 127, 128, 129, 16_385, 2_000_003])
def test_reductions_match_numpy(on_backend, n):
    values = (np.random.default_rng(n).standard_normal(n) * 50).astype(np.float32)
    reducer = Reducer(n)
    out = ti.ndarray(ti.f32, shape=3)
    array = _ndarray(values, ti.f32)
    reducer.sum(array, n, out, 0)
    reducer.min(array, n, out, 1)
    reducer.max(array, n, out, 2)
    total, low, high = out.to_numpy()
    assert total == pytest.approx(
        values.astype(np.float64).sum(), abs=float(1e-5 * np.abs(values).sum() + 1e-6)
    )
    assert low == (values.min() if n else np.inf)
    assert high == (values.max() if n else -np.inf)


def test_sum_gives_the_same_bits_every_run(on_backend):
    values = np.random.default_rng(11).standard_normal(1_000_003).astype(np.float32)
    reducer = Reducer(len(values))
    array = _ndarray(values, ti.f32)
    out = ti.ndarray(ti.f32, shape=1)
    results = set()
    for _ in range(5):
        reducer.sum(array, len(values), out)
        results.add(out.to_numpy()[0].tobytes())
    assert len(results) == 1


def test_vector_reduction_is_componentwise(on_backend):
    n = 10_007
    values = np.random.default_rng(5).standard_normal((n, 3)).astype(np.float32)
    array = ti.Vector.ndarray(3, ti.f32, shape=n)
    array.from_numpy(values)
    out = ti.Vector.ndarray(3, ti.f32, shape=2)
    reducer = Reducer(n, ti.f32, components=3)
    reducer.max(array, n, out, 0)
    reducer.min(array, 0, out, 1)
    np.testing.assert_array_equal(out.to_numpy()[0], values.max(axis=0))
    np.testing.assert_array_equal(out.to_numpy()[1], np.full(3, np.inf, np.float32))


@ti.kernel
def _fold_in_slot(values: ti.types.ndarray(ndim=1), n: ti.i32, out: ti.types.ndarray(ndim=1),
                  slot: ti.i32):  # fmt: skip
    for i in range(n):
        if i == 0:
            clear_slot(out, 1 - slot)
        merge_max(out, slot, values[i])


def test_slot_maximum_matches_numpy_and_clears_the_next_slot(on_backend):
    """Kernels folding with merge_max leave the exact componentwise maximum in their slot,
    also for all-negative values (a stale maximum from the call before last would show)."""
    maximum = SlotMaximum(3)
    rng = np.random.default_rng(17)
    slots = []
    for n in (1, 127, 128, 129, 70_001, 5, 3_001):
        values = (rng.standard_normal((n, 3)) * 10 - 100 * len(slots)).astype(np.float32)
        array = ti.Vector.ndarray(3, ti.f32, shape=n)
        array.from_numpy(values)
        slot = maximum.next_slot()
        _fold_in_slot(array, n, maximum.out, slot)
        slots.append(slot)
        np.testing.assert_array_equal(maximum.out.to_numpy()[slot], values.max(axis=0))
    assert slots == [0, 1, 0, 1, 0, 1, 0]


SPREAD_ROUND = SPREAD_LANES * SPREAD_BLOCK
"""Items of one block from every lane: spread_length rounds a count up to a multiple of it."""


@ti.kernel
def _spread_positions(order: I32Array, count: ti.i32):
    for t in range(spread_length(count)):
        order[t] = spread_index(t, count)


@pytest.mark.parametrize(
    "count", [0, 1, 31, 32, 33, 2047, SPREAD_LANES * SPREAD_BLOCK + 5, 100_003]
)
def test_spread_order_visits_every_item_once(on_backend, count):
    """The positions of a loop in spread order stand for every item below `count` exactly
    once (the others for none), so a loop over independent items gives the same results."""
    order = ti.ndarray(ti.i32, shape=SPREAD_ROUND * (count // SPREAD_ROUND + 2))
    order.fill(-1)
    _spread_positions(order, count)
    got = order.to_numpy()
    items = got[(got >= 0) & (got < count)]
    np.testing.assert_array_equal(np.sort(items), np.arange(count))


def test_spread_order_gives_each_thread_every_region(on_cpu):
    """Any contiguous half of the positions, which Taichi's CPU backend hands to one of two
    threads, holds about half of every eighth of the items (solver/parallel/spread_order.py)."""
    count = 100_003
    order = ti.ndarray(ti.i32, shape=SPREAD_ROUND * (count // SPREAD_ROUND + 2))
    order.fill(-1)
    _spread_positions(order, count)
    length = -(-count // SPREAD_ROUND) * SPREAD_ROUND  # spread_length(count)
    got = order.to_numpy()[:length]
    for half in (got[: length // 2], got[length // 2 :]):
        items = half[(half >= 0) & (half < count)]
        share = np.bincount(items * 8 // count, minlength=8) / (count / 8)
        assert np.all((share > 0.4) & (share < 0.6)), share
