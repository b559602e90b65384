"""Exclusive prefix sum of i32 arrays of any length, multi-level and deterministic.

The classic reduce-then-scan scheme (Blelloch 1990, "Prefix sums and their applications"):
level 0 splits the input into chunks of `chunk` elements, one thread a chunk; each thread sums its
chunk, the chunk sums are scanned recursively, and each thread then scans its chunk again
starting from its chunk's offset. Integer sums are exact, so the result is the same on every
backend and every run.
"""

import taichi as ti

DEFAULT_CHUNK = 128
"""Elements per thread: larger chunks mean fewer levels, so fewer kernel launches (which cost
tens of microseconds each from Python), at some loss of parallelism on very large arrays."""

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.kernel
def _chunk_sums(values: I32Array, n: ti.i32, chunk_size: ti.i32, sums: I32Array):
    for chunk in range((n + chunk_size - 1) // chunk_size):
        begin = chunk * chunk_size
        end = ti.min(begin + chunk_size, n)
        total = 0
        for i in range(begin, end):
            total += values[i]
        sums[chunk] = total


@ti.kernel
def _chunk_scan(values: I32Array, out: I32Array, n: ti.i32, chunk_size: ti.i32, offsets: I32Array):
    for chunk in range((n + chunk_size - 1) // chunk_size):
        begin = chunk * chunk_size
        end = ti.min(begin + chunk_size, n)
        running = offsets[chunk]
        for i in range(begin, end):
            value = values[i]
            out[i] = running
            running += value


@ti.kernel
def _serial_scan(values: I32Array, out: I32Array, n: ti.i32, total: I32Array):
    ti.loop_config(serialize=True)
    for _ in range(1):
        running = 0
        for i in range(n):
            value = values[i]
            out[i] = running
            running += value
        total[0] = running


def level_sizes(capacity: int, chunk: int = DEFAULT_CHUNK) -> list[int]:
    """Elements of the chunk-sum array of each level below the input, for `capacity` inputs."""
    sizes = []
    size = max(int(capacity), 1)
    while size > chunk:
        size = (size + chunk - 1) // chunk
        sizes.append(size)
    return sizes


class ExclusiveScan:
    """Exclusive prefix sum for i32 ndarrays of up to `capacity` elements.

    Scratch space for every level is allocated once here. `out` may be `values` (in place).
    After a call, `total` (a 1-element ndarray) holds the sum of all elements.
    """

    def __init__(self, capacity: int, chunk: int = DEFAULT_CHUNK) -> None:
        self.capacity = max(int(capacity), 1)
        self.chunk = int(chunk)
        self.total = ti.ndarray(ti.i32, shape=1)
        self._levels = [
            ti.ndarray(ti.i32, shape=size) for size in level_sizes(self.capacity, self.chunk)
        ]

    @staticmethod
    def nbytes(capacity: int, chunk: int = DEFAULT_CHUNK) -> int:
        """Device bytes of the scratch an `ExclusiveScan(capacity, chunk)` allocates."""
        return 4 * (1 + sum(level_sizes(capacity, chunk)))

    def __call__(self, values: ti.Ndarray, out: ti.Ndarray, n: int) -> None:
        """Write to out[i] the sum of values[0:i] for i < n; elements from n on are untouched."""
        if n > self.capacity:
            raise ValueError(f"scan of {n} elements exceeds its capacity {self.capacity}")
        self._scan(values, out, int(n), 0)

    def _scan(self, values: ti.Ndarray, out: ti.Ndarray, n: int, level: int) -> None:
        if n <= self.chunk:
            _serial_scan(values, out, n, self.total)
            return
        sums = self._levels[level]
        _chunk_sums(values, n, self.chunk, sums)
        chunks = (n + self.chunk - 1) // self.chunk
        self._scan(sums, sums, chunks, level + 1)
        _chunk_scan(values, out, n, self.chunk, sums)
