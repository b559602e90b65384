"""The particle arrays' sort: the reorder permutes every reordered array in place."""

import numpy as np
import pytest
import taichi as ti
from conftest import use_backend

from solver.particles import LAYOUT, ParticleArrays

REORDERED = [name for name, spec in LAYOUT.items() if spec.reordered]


def _filled(precision: str, capacity: int, n: int, rng: np.random.Generator) -> ParticleArrays:
    """Arrays with every reordered quantity random (ids 0..n-1 in order), symplectic and SPS
    arrays included."""
    dtype = ti.f64 if precision == "f64" else ti.f32
    p = ParticleArrays(capacity, dtype, keep_position_prev=True, keep_sps_stress=True)
    p.load(rng.random((n, 3)), np.arange(n) % 3, rng.random(n), rng.random(n), rng.random((n, 3)))
    for name in REORDERED:
        array = getattr(p, name)
        values = array.to_numpy()
        if values.dtype.kind == "f":
            array.from_numpy(rng.random(values.shape).astype(values.dtype))
    return p


@pytest.mark.parametrize(
    ("backend", "precision"), [("cpu", "f32"), ("vulkan", "f32"), ("cpu", "f64")]
)
def test_the_reorder_permutes_every_reordered_array_in_place(backend: str, precision: str) -> None:
    """Each reordered array's first n rows become its rows taken by `order`, the rows after
    them stay, and every array is the same device array as before (the kernels a batch queued
    after a sort were launched with them)."""
    use_backend(backend, precision)
    rng = np.random.default_rng(7)
    capacity, n = 40, 33
    p = _filled(precision, capacity, n, rng)
    before = {name: getattr(p, name).to_numpy() for name in REORDERED}
    identity = {name: id(getattr(p, name)) for name in REORDERED}
    permutation = rng.permutation(n)
    order = ti.ndarray(ti.i32, shape=capacity)
    order.from_numpy(np.concatenate([permutation, np.arange(n, capacity)]).astype(np.int32))
    p.reorder(order, n)
    assert p.count == n
    for name in REORDERED:
        after = getattr(p, name).to_numpy()
        np.testing.assert_array_equal(after[:n], before[name][permutation], err_msg=name)
        np.testing.assert_array_equal(after[n:], before[name][n:], err_msg=name)
        assert id(getattr(p, name)) == identity[name], name
