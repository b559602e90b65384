"""Reorder an array by a permutation: dst[i] = src[order[i]] for i < n."""

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
