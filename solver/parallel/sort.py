"""Stable sort of (key, value) pairs of i32 by key: a least-significant-digit radix sort.

Each pass orders by one digit of the key and keeps equal digits in input order (Knuth, TAOCP
vol. 3, 5.2.5), so the whole sort is stable. A pass is three deterministic steps, with no
atomics: every thread counts the digits of its own contiguous chunk into its own histogram
column, the histogram (digit-major, chunk-minor) is prefix-summed, and every thread walks its
chunk again in order, writing each element to the next free slot of its digit. Keys must lie in
[0, 2**key_bits).
"""

import taichi as ti

from solver.parallel.scan import ExclusiveScan

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)

MAX_DIGIT_BITS = 8


@ti.kernel
def _digit_histogram(
    keys: I32Array,
    n: ti.i32,
    shift: ti.i32,
    digit_bits: ti.i32,
    chunk: ti.i32,
    chunks: ti.i32,
    histogram: I32Array,
):
    radix = 1 << digit_bits
    for c in range(chunks):
        for d in range(radix):
            histogram[d * chunks + c] = 0
        end = ti.min((c + 1) * chunk, n)
        for i in range(c * chunk, end):
            slot = ((keys[i] >> shift) & (radix - 1)) * chunks + c
            # A plain read-modify-write: the column is this thread's own. (`+=` would become an
            # atomic add, which Taichi 1.7.4 miscompiles on SPIR-V inside a serial inner loop.)
            histogram[slot] = histogram[slot] + 1


@ti.kernel
def _scatter_by_digit(
    keys: I32Array,
    values: I32Array,
    keys_out: I32Array,
    values_out: I32Array,
    n: ti.i32,
    shift: ti.i32,
    digit_bits: ti.i32,
    chunk: ti.i32,
    chunks: ti.i32,
    offsets: I32Array,
):
    radix = 1 << digit_bits
    for c in range(chunks):
        end = ti.min((c + 1) * chunk, n)
        for i in range(c * chunk, end):
            key = keys[i]
            slot = ((key >> shift) & (radix - 1)) * chunks + c
            target = offsets[slot]
            offsets[slot] = target + 1
            keys_out[target] = key
            values_out[target] = values[i]


@ti.kernel
def _copy_pairs(
    keys: I32Array, values: I32Array, keys_out: I32Array, values_out: I32Array, n: ti.i32
):
    for i in range(n):
        keys_out[i] = keys[i]
        values_out[i] = values[i]


def digit_plan(key_bits: int, max_digit_bits: int = MAX_DIGIT_BITS) -> tuple[int, int, int]:
    """(passes, bits per pass, elements per thread) for keys of key_bits bits.

    The bits are spread evenly over the fewest passes of at most max_digit_bits; a thread's chunk
    holds at least as many elements as there are digits, so the histogram is no larger than n.
    """
    if key_bits <= 0:
        return 0, 0, 1
    passes = -(-key_bits // max_digit_bits)
    digit_bits = -(-key_bits // passes)
    return passes, digit_bits, max(1 << digit_bits, 32)


def histogram_size(capacity: int, max_digit_bits: int = MAX_DIGIT_BITS) -> int:
    """Histogram elements for up to `capacity` keys: a column of 2**bits per 32-element chunk
    (the smallest chunk `digit_plan` gives)."""
    return (1 << max_digit_bits) * (-(-max(int(capacity), 1) // 32))


class StableKeySort:
    """Stable radix sort of i32 (key, value) pairs for up to `capacity` elements.

    Inputs are not modified; outputs must be distinct from the inputs.
    """

    def __init__(self, capacity: int, max_digit_bits: int = MAX_DIGIT_BITS) -> None:
        self.capacity = max(int(capacity), 1)
        self.max_digit_bits = max_digit_bits
        size = histogram_size(self.capacity, max_digit_bits)
        self._histogram = ti.ndarray(ti.i32, shape=size)
        self._scan = ExclusiveScan(size)
        self._keys_tmp = ti.ndarray(ti.i32, shape=self.capacity)
        self._values_tmp = ti.ndarray(ti.i32, shape=self.capacity)

    @staticmethod
    def nbytes(capacity: int, max_digit_bits: int = MAX_DIGIT_BITS) -> int:
        """Device bytes of the scratch a `StableKeySort(capacity, ...)` allocates."""
        size = histogram_size(capacity, max_digit_bits)
        return 4 * (size + 2 * max(int(capacity), 1)) + ExclusiveScan.nbytes(size)

    def __call__(
        self,
        keys: ti.Ndarray,
        values: ti.Ndarray,
        keys_out: ti.Ndarray,
        values_out: ti.Ndarray,
        n: int,
        key_bits: int,
    ) -> None:
        """Sort the first n pairs by key into keys_out/values_out; keys < 2**key_bits."""
        if n > self.capacity:
            raise ValueError(f"sort of {n} elements exceeds its capacity {self.capacity}")
        if not 0 <= key_bits <= 31:
            raise ValueError(f"key_bits must be in [0, 31], got {key_bits}")
        passes, digit_bits, chunk = digit_plan(key_bits, self.max_digit_bits)
        if passes == 0 or n <= 1:
            _copy_pairs(keys, values, keys_out, values_out, n)
            return
        chunks = -(-n // chunk)
        histogram_size = (1 << digit_bits) * chunks
        # Ping-pong so that the last pass lands in the outputs.
        targets = [(keys_out, values_out), (self._keys_tmp, self._values_tmp)]
        source = (keys, values)
        for p in range(passes):
            target = targets[(passes - 1 - p) % 2]
            shift = p * digit_bits
            _digit_histogram(source[0], n, shift, digit_bits, chunk, chunks, self._histogram)
            self._scan(self._histogram, self._histogram, histogram_size)
            _scatter_by_digit(
                source[0],
                source[1],
                target[0],
                target[1],
                n,
                shift,
                digit_bits,
                chunk,
                chunks,
                self._histogram,
            )
            source = target
