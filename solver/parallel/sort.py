"""Stable sort of (key, value) pairs of i32 by key: a least-significant-digit radix sort.

Each pass orders by one digit of the key and keeps equal digits in input order (Knuth, TAOCP
vol. 3, 5.2.5), so the whole sort is stable. A pass is three deterministic steps, with no
atomics: every thread counts the digits of its own contiguous chunk into its own histogram
column, the histogram (digit-major, chunk-minor) is prefix-summed, and every thread walks its
chunk again in order, writing each element to the next free slot of its digit. Keys must lie in
[0, 2**key_bits).
"""

import taichi as ti

from solver.parallel.scan import build_scan, scratch_size

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)

MAX_DIGIT_BITS = 8


@ti.func
def _digit_histogram(
    keys: ti.template(), n, shift, digit_bits, chunk, chunks, histogram: ti.template()
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


@ti.func
def _scatter_by_digit(
    keys: ti.template(),
    values: ti.template(),
    keys_out: ti.template(),
    values_out: ti.template(),
    n,
    shift,
    digit_bits,
    chunk,
    chunks,
    offsets: ti.template(),
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
    """Histogram elements for up to `capacity` keys: 2**bits counts per chunk of
    max(2**bits, 32) keys (`digit_plan`), at most capacity + 2**bits - 1 whatever the key width."""
    return max(int(capacity), 1) + (1 << max_digit_bits)


class StableKeySort:
    """Stable radix sort of i32 (key, value) pairs for up to `capacity` elements.

    All passes of a sort, each with its histogram scan, run from one kernel launch (compiled
    once per key width). Inputs are not modified; outputs must be distinct from the inputs.
    """

    def __init__(self, capacity: int, max_digit_bits: int = MAX_DIGIT_BITS) -> None:
        self.capacity = max(int(capacity), 1)
        self.max_digit_bits = max_digit_bits
        self._histogram = ti.ndarray(ti.i32, shape=histogram_size(self.capacity, max_digit_bits))
        self._scan_scratch = ti.ndarray(ti.i32, shape=scratch_size(self._histogram.shape[0]))
        self._keys_tmp = ti.ndarray(ti.i32, shape=self.capacity)
        self._values_tmp = ti.ndarray(ti.i32, shape=self.capacity)
        self._kernels: dict[int, object] = {}

    @staticmethod
    def nbytes(capacity: int, max_digit_bits: int = MAX_DIGIT_BITS) -> int:
        """Device bytes a `StableKeySort(capacity, max_digit_bits)` allocates."""
        capacity = max(int(capacity), 1)
        histogram = histogram_size(capacity, max_digit_bits)
        return 4 * (histogram + scratch_size(histogram) + 2 * capacity)

    def sort_func(self, key_bits: int):
        """The radix sort of keys of key_bits bits as a Taichi function, to be called at the
        top level of a kernel: radix_sort(keys, values, keys_out, values_out, keys_tmp,
        values_tmp, n, histogram, scratch), the last four being `scratch_arrays()`. n may be
        computed on the device (0 sorts nothing); keys_out and values_out are untouched
        when key_bits needs no pass."""
        passes, digit_bits, chunk = digit_plan(key_bits, self.max_digit_bits)
        scan = build_scan(self._histogram.shape[0])

        @ti.func
        def radix_sort(
            keys: ti.template(),
            values: ti.template(),
            keys_out: ti.template(),
            values_out: ti.template(),
            keys_tmp: ti.template(),
            values_tmp: ti.template(),
            n,
            histogram: ti.template(),
            scratch: ti.template(),
        ):
            chunks = (n + chunk - 1) // chunk
            for p in ti.static(range(passes)):
                # Ping-pong so that the last pass lands in the outputs.
                last = ti.static((passes - 1 - p) % 2 == 0)
                source_keys = ti.static(keys if p == 0 else (keys_tmp if last else keys_out))
                source_values = ti.static(
                    values if p == 0 else (values_tmp if last else values_out)
                )
                target_keys = ti.static(keys_out if last else keys_tmp)
                target_values = ti.static(values_out if last else values_tmp)
                shift = p * digit_bits
                _digit_histogram(source_keys, n, shift, digit_bits, chunk, chunks, histogram)
                scan(histogram, histogram, (1 << digit_bits) * chunks, scratch)
                _scatter_by_digit(
                    source_keys, source_values, target_keys, target_values, n, shift,
                    digit_bits, chunk, chunks, histogram,
                )  # fmt: skip

        return radix_sort

    def scratch_arrays(self) -> tuple[ti.Ndarray, ti.Ndarray, ti.Ndarray, ti.Ndarray]:
        """(keys_tmp, values_tmp, histogram, scratch): the work arrays `sort_func` takes."""
        return self._keys_tmp, self._values_tmp, self._histogram, self._scan_scratch

    def _kernel(self, key_bits: int):
        """The one-launch sort of keys of key_bits bits (built on first use)."""
        if key_bits in self._kernels:
            return self._kernels[key_bits]
        sort = self.sort_func(key_bits)

        @ti.kernel
        def radix_sort(
            keys: I32Array,
            values: I32Array,
            keys_out: I32Array,
            values_out: I32Array,
            keys_tmp: I32Array,
            values_tmp: I32Array,
            n: ti.i32,
            histogram: I32Array,
            scratch: I32Array,
        ):
            sort(keys, values, keys_out, values_out, keys_tmp, values_tmp, n, histogram, scratch)

        self._kernels[key_bits] = radix_sort
        return radix_sort

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
        if digit_plan(key_bits, self.max_digit_bits)[0] == 0 or n <= 1:
            _copy_pairs(keys, values, keys_out, values_out, n)
            return
        self._kernel(key_bits)(
            keys, values, keys_out, values_out, self._keys_tmp, self._values_tmp, n,
            self._histogram, self._scan_scratch,
        )  # fmt: skip
