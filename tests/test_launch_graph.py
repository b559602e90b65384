"""Kernels launched through a compute graph (solver/launch_graph.py) do what a plain call does."""

import numpy as np
import pytest
import taichi as ti

from solver.launch_graph import GraphLaunch


@ti.kernel
def mixed_arguments(
    values: ti.types.ndarray(ndim=1),
    points: ti.types.ndarray(ndim=1),
    table: ti.types.ndarray(dtype=ti.i32, ndim=2),
    count: ti.i32,
    scale: float,
    shift: ti.math.vec3,
    cells: ti.math.ivec3,
):
    """Every kind of argument the solver's launched kernels take, each one read."""
    for i in range(count):
        values[i] = scale * values[i] + cells[0] - cells[2]
        points[i] = points[i] * scale + shift + ti.cast(cells, float)
        table[i, 1] += table[i, 0] * cells[1] + i


def arrays(seed: int) -> tuple[ti.Ndarray, ti.Ndarray, ti.Ndarray]:
    """The three arrays of `mixed_arguments`, filled from `seed`."""
    rng = np.random.default_rng(seed)
    values = ti.ndarray(ti.f32, 16)
    values.from_numpy(rng.standard_normal(16).astype(np.float32))
    points = ti.ndarray(ti.math.vec3, 16)
    points.from_numpy(rng.standard_normal((16, 3)).astype(np.float32))
    table = ti.ndarray(ti.i32, (16, 2))
    table.from_numpy(rng.integers(-50, 50, (16, 2)).astype(np.int32))
    return values, points, table


def test_a_graph_launch_matches_a_plain_call(on_backend: str) -> None:
    plain, graphed = arrays(7), arrays(7)
    launch = GraphLaunch(mixed_arguments)
    for count, scale in ((16, 0.5), (11, 1.25), (0, 3.0)):
        shift, cells = ti.math.vec3(0.25, -1.5, 2.0), ti.math.ivec3(3, -2, 5)
        mixed_arguments(*plain, count, scale, shift, cells)
        launch(*graphed, count, scale, shift, cells)
    ti.sync()
    for a, b in zip(plain, graphed, strict=True):
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    assert not np.array_equal(plain[0].to_numpy(), arrays(7)[0].to_numpy())  # the kernel ran


def test_a_graph_launch_takes_vectors_as_tuples_and_numpy_scalars(on_cpu: str) -> None:
    plain, graphed = arrays(3), arrays(3)
    mixed_arguments(*plain, 16, 2.0, ti.math.vec3(1.0, 2.0, 3.0), ti.math.ivec3(1, 2, 3))
    GraphLaunch(mixed_arguments)(*graphed, np.int32(16), np.float32(2.0), (1.0, 2.0, 3.0),
                                 np.array([1, 2, 3]))  # fmt: skip
    for a, b in zip(plain, graphed, strict=True):
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())


def test_a_graph_launch_refuses_a_wrong_number_of_arguments(on_cpu: str) -> None:
    with pytest.raises(TypeError, match="mixed_arguments takes 7 arguments, got 6"):
        GraphLaunch(mixed_arguments)(*arrays(1), 16, 2.0, ti.math.vec3(0, 0, 0))


@ti.kernel
def total(values: ti.types.ndarray(ndim=1)) -> float:
    """A kernel with a return value, which a graph cannot give back."""
    result = 0.0
    for i in range(values.shape[0]):
        result += values[i]
    return result


def test_a_kernel_with_a_return_value_is_refused(on_cpu: str) -> None:
    with pytest.raises(TypeError, match="total returns a value"):
        GraphLaunch(total)
