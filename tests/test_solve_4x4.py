"""The 4 x 4 solve of the mDBC fit (solver/physics/solve_4x4.py) against numpy's LU solve, in
numpy and inside a kernel on every backend."""

import numpy as np
import taichi as ti

from solver.physics.shared_formula import taichi_func
from solver.physics.solve_4x4 import determinant_and_adjugate_product


def _systems(count: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """`count` well-conditioned 4 x 4 systems like the mDBC moments (near the identity, with
    off-diagonal moments of a part-empty support) and their right-hand sides."""
    rng = np.random.default_rng(seed)
    a = np.eye(4) + 0.4 * rng.normal(size=(count, 4, 4))
    b = rng.normal(size=(count, 4)) * np.array([1000.0, 1.0, 1.0, 1.0])
    return a, b


def test_numpy_matches_lu_solve() -> None:
    a, b = _systems(500)
    for m, v in zip(a, b, strict=True):
        det, *y = determinant_and_adjugate_product(m, v)
        assert np.isclose(det, np.linalg.det(m), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.array(y) / det, np.linalg.solve(m, v), rtol=1e-9, atol=1e-9)


def test_singular_matrix_has_zero_determinant() -> None:
    m = np.arange(16.0).reshape(4, 4)  # rank 2
    det, *_ = determinant_and_adjugate_product(m, np.ones(4))
    assert abs(det) < 1e-9


def test_kernel_matches_numpy(on_backend: str) -> None:
    count = 64
    a, b = _systems(count, seed=11)
    solve = taichi_func(determinant_and_adjugate_product)
    matrices = ti.Matrix.ndarray(4, 4, ti.f32, shape=count)
    vectors = ti.Vector.ndarray(4, ti.f32, shape=count)
    out = ti.Vector.ndarray(5, ti.f32, shape=count)
    matrices.from_numpy(a.astype(np.float32))
    vectors.from_numpy(b.astype(np.float32))

    @ti.kernel
    def run(m: ti.types.ndarray(ndim=1), v: ti.types.ndarray(ndim=1), o: ti.types.ndarray(ndim=1)):
        for i in range(m.shape[0]):
            det, y0, y1, y2, y3 = solve(m[i], v[i])
            o[i] = ti.Vector([det, y0 / det, y1 / det, y2 / det, y3 / det])

    run(matrices, vectors, out)
    got = out.to_numpy()
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(got[:, 0], np.linalg.det(a32), rtol=1e-4, atol=1e-5)
    expected = np.linalg.solve(a32, b32[..., None])[..., 0]
    scale = np.abs(expected).max(axis=1, keepdims=True)
    assert np.all(np.abs(got[:, 1:] - expected) <= 1e-4 * scale), (got[:, 1:], expected)
