"""Deterministic sum, min and max of float arrays.

A fixed-shape reduction tree: every thread folds its own contiguous chunk of CHUNK elements in
index order, then the partial results are folded the same way, level after level. The order of
additions depends only on n, never on thread scheduling, so a sum gives the same bits on every
run of one backend (unlike a float atomic_add; see ../shared/reference/taichi-notes.md, section
4). Results land in an element of a device array, so a consumer kernel can read them without a
round trip to the host.

A maximum needs no tree: `merge_max` lets any kernel fold one into a `SlotMaximum` as it does
its own work (the interaction folds the time-step maxima this way), exact in any order.
"""

import taichi as ti

CHUNK = 128
SUM, MIN, MAX = 0, 1, 2
_NEG_INF = float("-inf")
_IDENTITY = {SUM: 0.0, MIN: float("inf"), MAX: _NEG_INF}


@ti.func
def _combine(a, b, op: ti.template()):
    result = a
    if ti.static(op == SUM):
        result = a + b
    elif ti.static(op == MIN):
        result = ti.min(a, b)
    else:
        result = ti.max(a, b)
    return result


@ti.kernel
def _fold_chunks(
    values: ti.types.ndarray(ndim=1),
    n: ti.i32,
    out: ti.types.ndarray(ndim=1),
    out_index: ti.i32,
    op: ti.template(),
):
    for c in range((n + CHUNK - 1) // CHUNK):
        begin = c * CHUNK
        acc = values[begin]
        for i in range(begin + 1, ti.min(begin + CHUNK, n)):
            acc = _combine(acc, values[i], op)
        out[out_index + c] = acc


@ti.func
def merge_max(out: ti.template(), slot, value):
    """out[slot] = max(out[slot], value) componentwise, from any number of threads at once.

    An atomic max only where `value` exceeds what `out[slot]` holds already: after the first
    few particles almost none do, so a kernel over millions of particles can fold a maximum as
    it goes, with little contention and no launch of its own (the read may be stale; that only
    costs an atomic). A maximum does not depend on the order of its operands, so the result is
    the same bits on every run, unlike an atomic sum.
    """
    current = out[slot]
    for k in ti.static(range(value.n)):
        if value[k] > current[k]:
            ti.atomic_max(out[slot][k], value[k])


@ti.func
def clear_slot(out: ti.template(), slot):
    """out[slot] = -inf in every component."""
    out[slot].fill(_NEG_INF)


@ti.kernel
def _store(out: ti.types.ndarray(ndim=1), out_index: ti.i32, value: float):
    out[out_index] = value


@ti.kernel
def _store_vector(out: ti.types.ndarray(ndim=1), out_index: ti.i32, value: float):
    out[out_index].fill(value)


def level_sizes(capacity: int) -> list[int]:
    """Elements of the partial-result array of each level, for up to `capacity` inputs."""
    sizes = []
    size = max(int(capacity), 1)
    while size > CHUNK:
        size = (size + CHUNK - 1) // CHUNK
        sizes.append(size)
    return sizes


class Reducer:
    """Sum, min and max over the first n elements of 1-D float arrays of up to `capacity`.

    `dtype` (ti.f32 or ti.f64) is the element type of the arrays it reduces; with
    `components` > 1 the elements are vectors of that length, reduced component by component
    in one pass (several maxima for the price of one launch per level).
    """

    def __init__(self, capacity: int, dtype=ti.f32, components: int = 1) -> None:
        self._vector = components > 1
        self._levels = [
            ti.Vector.ndarray(components, dtype, shape=size)
            if self._vector
            else ti.ndarray(dtype, shape=size)
            for size in level_sizes(capacity)
        ]
        self.capacity = max(int(capacity), 1)

    @staticmethod
    def nbytes(capacity: int, real_bytes: int, components: int = 1) -> int:
        """Device bytes of the partial results a `Reducer(capacity, ...)` allocates."""
        return components * real_bytes * sum(level_sizes(capacity))

    def sum(self, values: ti.Ndarray, n: int, out: ti.Ndarray, index: int = 0) -> None:
        """out[index] = values[0] + ... + values[n-1], in a fixed order (0 when n is 0)."""
        self._reduce(values, n, out, index, SUM)

    def min(self, values: ti.Ndarray, n: int, out: ti.Ndarray, index: int = 0) -> None:
        """out[index] = min of values[0:n] (+inf when n is 0)."""
        self._reduce(values, n, out, index, MIN)

    def max(self, values: ti.Ndarray, n: int, out: ti.Ndarray, index: int = 0) -> None:
        """out[index] = max of values[0:n] (-inf when n is 0)."""
        self._reduce(values, n, out, index, MAX)

    def _reduce(self, values: ti.Ndarray, n: int, out: ti.Ndarray, index: int, op: int) -> None:
        if n > self.capacity:
            raise ValueError(f"reduction of {n} elements exceeds its capacity {self.capacity}")
        if n == 0:
            (_store_vector if self._vector else _store)(out, index, _IDENTITY[op])
            return
        level = 0
        while n > CHUNK:
            partial = self._levels[level]
            _fold_chunks(values, n, partial, 0, op)
            values, n, level = partial, (n + CHUNK - 1) // CHUNK, level + 1
        _fold_chunks(values, n, out, index, op)


class SlotMaximum:
    """Two device slots for a maximum that a kernel folds while doing its own work.

    A kernel given (`out`, `next_slot()`) merges its values into out[slot] with `merge_max` and
    calls `clear_slot(out, 1 - slot)` before its loops (serial code of the same launch), ready
    for the next kernel: no launch of its own resets or folds the maximum. out[slot] stays
    valid until the call after next, so later kernels can read it on the device.
    """

    def __init__(self, components: int, dtype=ti.f32) -> None:
        self.out = ti.Vector.ndarray(components, dtype, shape=2)
        self.out.fill(_NEG_INF)
        self._next = 0

    @staticmethod
    def nbytes(components: int, real_bytes: int) -> int:
        """Device bytes a `SlotMaximum(components, ...)` allocates: its two slots."""
        return 2 * components * real_bytes

    def next_slot(self) -> int:
        """The slot the next kernel fills (it clears the other)."""
        slot = self._next
        self.claim(1)
        return slot

    def next_slots(self, count: int) -> list[int]:
        """The slots the next `count` kernels fill, in order, not yet claimed: kernels launched
        in a batch that the device may cut short claim only those that ran (`claim`)."""
        return [(self._next + k) % 2 for k in range(count)]

    def claim(self, count: int) -> None:
        """Record that `count` more kernels filled their slots, alternating."""
        self._next = (self._next + count) % 2
