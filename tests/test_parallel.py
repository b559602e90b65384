"""The portable building blocks against numpy, on every backend: scan, stable sort, gather,
reductions, and the determinism the solver relies on."""

import numpy as np
import pytest
import taichi as ti

from solver.parallel.gather import gather
from solver.parallel.reduce import Reducer, SlotMaximum, clear_slot, merge_max
from solver.parallel.scan import ExclusiveScan
from solver.parallel.sort import MAX_DIGIT_BITS, StableKeySort, digit_plan, histogram_size

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


def _sorted_by_radix(keys: np.ndarray, key_bits: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(keys)
    sorter = StableKeySort(n)
    keys_out = ti.ndarray(ti.i32, shape=max(n, 1))
    values_out = ti.ndarray(ti.i32, shape=max(n, 1))
    sorter(
        _ndarray(keys.astype(np.int32)),
        _ndarray(np.arange(n, dtype=np.int32)),
        keys_out,
        values_out,
        n,
        key_bits,
    )
    return keys_out.to_numpy()[:n], values_out.to_numpy()[:n]


SORT_CASES = {
    "random": lambda rng: rng.integers(0, 2**15, 200_001),
    "one cell": lambda rng: np.full(100_000, 4321),
    "empty cells": lambda rng: rng.choice([3, 17, 30000], 50_000),
    "already sorted": lambda rng: np.sort(rng.integers(0, 2**15, 70_000)),
    "reversed": lambda rng: np.sort(rng.integers(0, 2**15, 70_000))[::-1].copy(),
    "tiny": lambda rng: np.array([5, 1, 5, 0, 1]),
    "single": lambda rng: np.array([9]),
    "empty": lambda rng: np.zeros(0, dtype=np.int64),
}


@pytest.mark.parametrize("case", SORT_CASES)
def test_stable_sort_matches_numpy_stable_argsort(on_backend, case):
    keys = SORT_CASES[case](np.random.default_rng(7)).astype(np.int32)
    sorted_keys, order = _sorted_by_radix(keys, key_bits=15)
    expected = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(sorted_keys, keys[expected])


@pytest.mark.parametrize("key_bits", [0, 1, 9, 17, 24, 31])
def test_stable_sort_every_key_width(on_backend, key_bits):
    rng = np.random.default_rng(key_bits)
    keys = rng.integers(0, 2**key_bits, 30_001).astype(np.int32)
    _, order = _sorted_by_radix(keys, key_bits)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))


def test_sort_is_bitwise_repeatable(on_backend):
    keys = np.random.default_rng(3).integers(0, 300, 100_000).astype(np.int32)
    first = _sorted_by_radix(keys, 9)
    second = _sorted_by_radix(keys, 9)
    np.testing.assert_array_equal(first[1], second[1])


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


@pytest.mark.parametrize("key_bits", range(1, 32))
def test_the_histogram_holds_every_pass_of_every_key_width(key_bits: int) -> None:
    """The sort's histogram (2**bits counts per chunk of keys, `digit_plan`) fits the array
    `histogram_size` allocates, for every key width and counts around each chunk boundary."""
    _, digit_bits, chunk = digit_plan(key_bits)
    assert digit_bits <= MAX_DIGIT_BITS
    counts = [1, 2, 31, 32, 33, 255, 256, 257, 4003236, 16_000_003]
    counts += [k * chunk + d for k in (1, 7, 1000) for d in (-1, 0, 1)]
    for n in counts:
        used = (1 << digit_bits) * -(-n // chunk)
        assert used <= histogram_size(n), (n, used)
