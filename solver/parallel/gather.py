"""Move rows by an index list: gather (dst[i] = src[order[i]], a reorder by a permutation) and
scatter (dst[index[i]] = src[i]), for i < n."""

import taichi as ti


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
