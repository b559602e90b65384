"""Cell list and neighbour iteration on a uniform grid, built from the portable sort and scan.

The grid covers the domain box with cubic cells no smaller than the kernel support, numbered
x fastest: key = (cz * ny + cy) * nx + cx. Each update sorts the particles by (cell, id) with
a stable radix sort started from id order, so the order inside a cell is by particle id on every
backend and every run; `cell_offsets[k]` is the number of live particles in cells below k.
Because the three cells (cx-1..cx+1, cy, cz) are consecutive keys, the 27 neighbouring cells are
nine contiguous index ranges ("rows"), as in DualSPHysics (Dominguez et al. 2011, "Neighbour
lists in smoothed particle hydrodynamics").

Cell coordinates are clamped to the grid (NaN to 0), which keeps every access in range; clamping
moves two coordinates at most as far apart as they were, so no neighbour within the support is
ever missed, even for particles outside the domain. Memory is O(capacity + cells).
"""

import numpy as np
import taichi as ti

from solver.parallel.scan import ExclusiveScan
from solver.parallel.sort import StableKeySort

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.func
def cell_coord(p, lo, inv_cell, dims):
    """Integer cell coordinates of position p, clamped to the grid; NaN maps to 0."""
    c = ti.Vector([0, 0, 0])
    for a in ti.static(range(3)):
        t = (p[a] - lo[a]) * inv_cell
        index = 0
        if t >= dims[a]:
            index = dims[a] - 1
        elif t >= 1.0:
            index = ti.cast(t, ti.i32)
        c[a] = index
    return c


@ti.func
def cell_key(c, dims):
    """Linear cell number of cell coordinates c (x fastest)."""
    return (c[2] * dims[1] + c[1]) * dims[0] + c[0]


@ti.func
def row_range(c, row, dims, cell_offsets: ti.template()):
    """[begin, end) of the sorted particles in neighbour row `row` (0..8) of cell c.

    Row r covers cells (c.x-1 .. c.x+1, c.y + r % 3 - 1, c.z + r // 3 - 1), cut to the grid.
    """
    y = c[1] + row % 3 - 1
    z = c[2] + row // 3 - 1
    begin = 0
    end = 0
    if 0 <= y < dims[1] and 0 <= z < dims[2]:
        base = (z * dims[1] + y) * dims[0]
        begin = cell_offsets[base + ti.max(c[0] - 1, 0)]
        end = cell_offsets[base + ti.min(c[0] + 1, dims[0] - 1) + 1]
    return ti.Vector([begin, end])


@ti.kernel
def _assign_keys(position: ti.types.ndarray(ndim=1), ids: I32Array, removed: I32Array,
                 n: ti.i32, lo: ti.math.vec3, inv_cell: float, dims: ti.math.ivec3,
                 sentinel: ti.i32, key_by_id: I32Array, index_by_id: I32Array,
                 cell_counts: I32Array):
    for i in range(n):
        key = sentinel
        if removed[i] == 0:
            key = cell_key(cell_coord(position[i], lo, inv_cell, dims), dims)
            ti.atomic_add(cell_counts[key], 1)
        key_by_id[ids[i]] = key
        index_by_id[ids[i]] = i


class CellGrid:
    """A uniform cell grid over the box [lo, hi] for up to `capacity` particles.

    Particle ids must lie in [0, capacity). After `update`, `order[i]` (i < live count) is the
    old index of the particle that goes to place i, and `cell_offsets` bounds each cell.
    """

    def __init__(self, lo, hi, support_radius: float, capacity: int) -> None:
        self.lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        if support_radius <= 0 or np.any(hi <= self.lo):
            raise ValueError("grid needs lo < hi on every axis and a positive support radius")
        # Cubic cells a hair larger than the support, so rounding in (p - lo) / cell can never
        # put two particles closer than the support two cells apart.
        self.cell_size = float(support_radius) * (1.0 + 1e-5)
        self.dims = np.maximum(np.ceil((hi - self.lo) / self.cell_size).astype(np.int64), 1)
        self.num_cells = int(np.prod(self.dims))
        if self.num_cells >= 2**31 - 2:
            raise ValueError(f"grid of {self.num_cells} cells is too large for 32-bit keys")
        self.sentinel = self.num_cells
        self.key_bits = self.sentinel.bit_length()
        self.capacity = int(capacity)
        cap = max(self.capacity, 1)
        self.key_by_id = ti.ndarray(ti.i32, shape=cap)
        self.index_by_id = ti.ndarray(ti.i32, shape=cap)
        self.sorted_keys = ti.ndarray(ti.i32, shape=cap)
        self.order = ti.ndarray(ti.i32, shape=cap)
        self.cell_offsets = ti.ndarray(ti.i32, shape=self.num_cells + 1)
        self._sort = StableKeySort(cap)
        self._scan = ExclusiveScan(self.num_cells + 1)

    @property
    def inv_cell(self) -> float:
        """1 / cell size."""
        return 1.0 / self.cell_size

    def kernel_args(self) -> tuple:
        """(lo, inv_cell, dims, cell_offsets), the grid arguments of a physics kernel."""
        return (ti.Vector(self.lo.tolist()), self.inv_cell,
                ti.Vector([int(d) for d in self.dims], dt=ti.i32), self.cell_offsets)

    def update(self, position: ti.Ndarray, ids: ti.Ndarray, removed: ti.Ndarray, n: int) -> int:
        """Sort the first n particles by (cell, id), dropping those with removed[i] != 0.

        Returns the number of particles kept; they are the first ones of `order`.
        """
        if n > self.capacity:
            raise ValueError(f"{n} particles exceed the grid's capacity {self.capacity}")
        self.key_by_id.fill(self.sentinel)
        self.cell_offsets.fill(0)
        lo, inv_cell, dims, _ = self.kernel_args()
        _assign_keys(position, ids, removed, n, lo, inv_cell, dims, self.sentinel,
                     self.key_by_id, self.index_by_id, self.cell_offsets)
        self._scan(self.cell_offsets, self.cell_offsets, self.num_cells + 1)
        self._sort(self.key_by_id, self.index_by_id, self.sorted_keys, self.order,
                   self.capacity, self.key_bits)
        return int(self.cell_offsets[self.num_cells])
