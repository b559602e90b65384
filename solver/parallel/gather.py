"""Move rows by an index list: gather (dst[i] = src[order[i]], a reorder by a permutation) and
scatter (dst[index[i]] = src[i]), for i < n; and `whole`, the host array that fills the first
rows of a device array in one copy."""

import numpy as np
import taichi as ti


def whole(values: np.ndarray, array: ti.Ndarray) -> np.ndarray:
    """`values` as the first rows of a host copy of all of `array` (zeros after them): what
    `array.from_numpy` takes to fill only those rows' worth of data."""
    full = np.zeros(array.shape + tuple(array.element_shape), dtype=values.dtype)
    full[: len(values)] = values
    return full


@ti.kernel
def gather(
    src: ti.types.ndarray(),
    dst: ti.types.ndarray(),
    order: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
):
    """Gather rows of `src` (any dtype, scalar or vector elements) into `dst` by `order`."""
    for i in range(n):
        dst[i] = src[order[i]]


@ti.kernel
def scatter(
    src: ti.types.ndarray(),
    dst: ti.types.ndarray(),
    index: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
):
    """Scatter the first n rows of `src` into `dst` at `index` (distinct indices)."""
    for i in range(n):
        dst[index[i]] = src[i]
