"""Sort by (key, id) into buckets whose ends are known: a counting sort finished in place.

Where every element's key is known and the keys have been counted and prefix-summed (the cell
grid counts them as it files its particles and keeps the sums as its cell offsets,
solver/neighbors.py; `build_sort_counted` does the rest for it and for `BucketSort`), the sort
itself takes two parallel passes, where a radix sort takes three per digit of the key:

1. *Place.* `ends[k]` holds the end of key k's bucket (an inclusive prefix sum of the
   counts). Each element takes a slot of its bucket by an atomic decrement of its end, so
   afterwards `ends[k]` holds the bucket's start: the exclusive prefix sum the cell grid keeps.
   Which slot an element got depends on the order the threads ran in.
2. *Rank.* Each element counts the elements of its own bucket with a smaller id and moves to
   that rank within the bucket. Ids are unique, so the result is the order by (key, id) on
   every backend and every run, whatever order the atomics took.

This is the counting sort of Knuth (TAOCP vol. 3, 5.2, "distribution counting"), with ties
broken by rank instead of by a stable scan, so that both passes are fully parallel. A rank costs
the size of its bucket: the cell grid's buckets are cells of a fraction of the kernel support,
which hold a few particles (at most about ten at the densest water the density band allows).
A bucket of m elements costs m^2 comparisons in all, so the sort is meant for keys that spread
the elements thinly, as cells do. Only 32-bit integer atomics are used (Metal has no others).
"""

import taichi as ti

from solver.parallel.scan import build_scan, scratch_size

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.func
def clear(counts: ti.template(), n):
    """counts[k] = 0 for k < n: the counts a sort's keys are counted into."""
    for k in range(n):
        counts[k] = 0


@ti.func
def place_in_buckets(keys: ti.template(), n, limit, ends: ti.template(),
                     slot_element: ti.template()):  # fmt: skip
    """Pass 1: for each i < n whose key k = keys[i] is below `limit` (the others are left out),
    slot_element[slot] = i for a free slot of its bucket [ends[k] - count, ends[k]); leaves
    ends[k] at the bucket's start."""
    for i in range(n):
        key = keys[i]
        if key < limit:
            slot = ti.atomic_sub(ends[key], 1) - 1
            slot_element[slot] = i


@ti.func
def rank_in_buckets(keys: ti.template(), ids: ti.template(), placed, starts: ti.template(),
                    slot_element: ti.template(), order: ti.template(),
                    sorted_keys: ti.template()):  # fmt: skip
    """Pass 2: the first `placed` slots, filled by pass 1 with buckets [starts[k],
    starts[k + 1]), are rewritten in (key, id) order: order[s] is the element at place s and
    sorted_keys[s] its key."""
    for s in range(placed):
        i = slot_element[s]
        key = keys[i]
        own = ids[i]
        begin = starts[key]
        rank = 0
        for t in range(begin, starts[key + 1]):
            rank += ti.select(ids[slot_element[t]] < own, 1, 0)
        order[begin + rank] = i
        sorted_keys[begin + rank] = key


def build_sort_counted(num_keys: int):
    """A Taichi function finishing the sort of keys in [0, num_keys) once they are counted, to be
    called at the top level of a kernel: sort_counted(keys, ids, n, active, ends, scratch,
    slot_element, order, sorted_keys) takes `ends` holding each key's count (ends[num_keys]
    = 0: an element whose key is num_keys is left out), prefix-sums it (`scratch` of
    `scratch_size(num_keys + 1)`), then places and ranks the first n elements, so that
    `ends[k]` is key k's start and order[s], sorted_keys[s] the (key, id) order. active is 1,
    or 0 (computed on the device) to leave everything as it is; a product, not a select,
    because a select on a condition Taichi folds to a constant fails to compile for SPIR-V."""
    scan = build_scan(num_keys + 1, inclusive=True)

    @ti.func
    def sort_counted(
        keys: ti.template(),
        ids: ti.template(),
        n,
        active,
        ends: ti.template(),
        scratch: ti.template(),
        slot_element: ti.template(),
        order: ti.template(),
        sorted_keys: ti.template(),
    ):
        scan(ends, ends, (num_keys + 1) * active, scratch)  # each key's end
        place_in_buckets(keys, n * active, num_keys, ends, slot_element)  # now its start
        placed = ends[num_keys] * active
        rank_in_buckets(keys, ids, placed, ends, slot_element, order, sorted_keys)

    return sort_counted


class BucketSort:
    """The sort above as one launch, for up to `capacity` (key, id) pairs with keys in
    [0, num_keys), counting the keys itself (the cell grid counts them as it files its
    particles, solver/neighbors.py, and finishes with the same `build_sort_counted`)."""

    def __init__(self, capacity: int, num_keys: int) -> None:
        self.capacity = max(int(capacity), 1)
        self.num_keys = int(num_keys)
        self._ends = ti.ndarray(ti.i32, shape=self.num_keys + 1)
        self._scratch = ti.ndarray(ti.i32, shape=scratch_size(self.num_keys + 1))
        self._slot_element = ti.ndarray(ti.i32, shape=self.capacity)
        sort_counted = build_sort_counted(self.num_keys)

        @ti.kernel
        def bucket_sort(
            keys: I32Array, ids: I32Array, n: ti.i32, num_keys: ti.i32, ends: I32Array,
            scratch: I32Array, slot_element: I32Array, order: I32Array, sorted_keys: I32Array,
        ):  # fmt: skip
            clear(ends, num_keys + 1)
            for i in range(n):
                ti.atomic_add(ends[keys[i]], 1)
            sort_counted(keys, ids, n, 1, ends, scratch, slot_element, order, sorted_keys)

        self._kernel = bucket_sort

    def __call__(
        self,
        keys: ti.Ndarray,
        ids: ti.Ndarray,
        order: ti.Ndarray,
        sorted_keys: ti.Ndarray,
        n: int,
    ) -> None:
        """order[s] = the index of the element at place s of the (key, id) order of the first
        n elements, sorted_keys[s] its key. Ids must be unique, keys in [0, num_keys)."""
        if n > self.capacity:
            raise ValueError(f"sort of {n} elements exceeds its capacity {self.capacity}")
        self._kernel(
            keys, ids, n, self.num_keys, self._ends, self._scratch, self._slot_element, order,
            sorted_keys,
        )  # fmt: skip
