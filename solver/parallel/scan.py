"""Prefix sums (exclusive, or inclusive for the cell sort) of i32 arrays of any length, one launch.

The classic reduce-then-scan scheme (Blelloch 1990, "Prefix sums and their applications"):
level 0 splits the input into chunks of `chunk` elements, one thread a chunk; each thread sums
its chunk, the chunk sums are scanned the same way one level up, and each thread then scans its
chunk again starting from its chunk's offset. Integer sums are exact, so the result is the same
on every backend and every run.

The number of levels follows from the capacity, so all of them are unrolled into one Taichi
function (`build_scan`): a kernel that calls it at its top level runs every level as its own
parallel loop, in order, from a single launch. A launch from Python costs tens of microseconds,
more than a level's work below millions of elements; the bucket sort and the cell grid inline
the same function into their own kernels.
"""

from collections.abc import Callable

import taichi as ti

DEFAULT_CHUNK = 128
"""Elements per thread: larger chunks mean fewer levels, at some loss of parallelism."""

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)


def level_sizes(capacity: int, chunk: int = DEFAULT_CHUNK) -> list[int]:
    """Elements of the chunk-sum array of each level below the input, for `capacity` inputs."""
    sizes = []
    size = max(int(capacity), 1)
    while size > chunk:
        size = (size + chunk - 1) // chunk
        sizes.append(size)
    return sizes


def scratch_size(capacity: int, chunk: int = DEFAULT_CHUNK) -> int:
    """Elements of the scratch array a scan of up to `capacity` elements needs: every level's
    chunk sums, then the total."""
    return sum(level_sizes(capacity, chunk)) + 1


def build_scan(capacity: int, chunk: int = DEFAULT_CHUNK, inclusive: bool = False) -> Callable:
    """A Taichi function scan(values, out, n, scratch) for n <= capacity, to be called at the
    top level of a kernel: out[i] = values[0] + ... + values[i-1] for i < n (out may be
    values), elements from n on untouched, the total left in scratch[scratch_size - 1].
    With `inclusive`, out[i] also adds values[i] (the sum up to and with i)."""
    sizes = level_sizes(capacity, chunk)
    own = int(inclusive)  # times values[i] in out[i]
    levels = len(sizes)
    base = [sum(sizes[:level]) for level in range(levels)]
    total_at = sum(sizes)

    @ti.func
    def level_size(n, level: ti.template()):
        size = n
        for _ in ti.static(range(level)):
            size = (size + chunk - 1) // chunk
        return size

    @ti.func
    def scan(values: ti.template(), out: ti.template(), n, scratch: ti.template()):
        for level in ti.static(range(levels)):  # up: chunk sums of each level's input
            for c in range((level_size(n, level) + chunk - 1) // chunk):
                end = ti.min((c + 1) * chunk, level_size(n, level))
                total = 0
                for i in range(c * chunk, end):
                    if ti.static(level == 0):
                        total += values[i]
                    else:
                        total += scratch[base[level - 1] + i]
                scratch[base[level] + c] = total
        for _ in range(1):  # the top level (at most `chunk` elements), by one thread
            running = 0
            for i in range(level_size(n, levels)):
                if ti.static(levels == 0):
                    value = values[i]
                    out[i] = running + own * value
                    running += value
                else:
                    value = scratch[base[levels - 1] + i]
                    scratch[base[levels - 1] + i] = running
                    running += value
            scratch[total_at] = running
        for level in ti.static(range(levels - 1, -1, -1)):  # down: chunks from their offsets
            for c in range((level_size(n, level) + chunk - 1) // chunk):
                end = ti.min((c + 1) * chunk, level_size(n, level))
                running = scratch[base[level] + c]
                for i in range(c * chunk, end):
                    if ti.static(level == 0):
                        value = values[i]
                        out[i] = running + own * value
                        running += value
                    else:
                        value = scratch[base[level - 1] + i]
                        scratch[base[level - 1] + i] = running
                        running += value

    return scan


class ExclusiveScan:
    """Exclusive prefix sum for i32 ndarrays of up to `capacity` elements, in one launch.

    Scratch space for every level is allocated once here. `out` may be `values` (in place).
    After a call, `total` (a 1-element ndarray) holds the sum of all elements.
    """

    def __init__(self, capacity: int, chunk: int = DEFAULT_CHUNK) -> None:
        self.capacity = max(int(capacity), 1)
        self.chunk = int(chunk)
        self.total = ti.ndarray(ti.i32, shape=1)
        self._scratch = ti.ndarray(ti.i32, shape=scratch_size(self.capacity, self.chunk))
        scan = build_scan(self.capacity, self.chunk)
        total_at = scratch_size(self.capacity, self.chunk) - 1

        @ti.kernel
        def exclusive_scan(
            values: I32Array, out: I32Array, n: ti.i32, scratch: I32Array, total: I32Array
        ):
            scan(values, out, n, scratch)
            total[0] = scratch[total_at]

        self._kernel = exclusive_scan

    @staticmethod
    def nbytes(capacity: int, chunk: int = DEFAULT_CHUNK) -> int:
        """Device bytes of the scratch an `ExclusiveScan(capacity, chunk)` allocates."""
        return 4 * (1 + scratch_size(capacity, chunk))

    def __call__(self, values: ti.Ndarray, out: ti.Ndarray, n: int) -> None:
        """Write to out[i] the sum of values[0:i] for i < n; elements from n on are untouched."""
        if n > self.capacity:
            raise ValueError(f"scan of {n} elements exceeds its capacity {self.capacity}")
        self._kernel(values, out, int(n), self._scratch, self.total)
