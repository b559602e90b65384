"""Cell list and neighbour iteration on a uniform grid, built from the portable sort and scan.

The grid covers the domain box with cells of a whole fraction of the kernel support across (half on
the CPU, a third on GPUs: `cells_per_support`), `x_refinement` times thinner along x (cubic on the
CPU, 2 times thinner on GPUs), numbered x fastest: cell = (cz * ny + cy) * nx + cx. The particles
are filed in two blocks: group 0 (the fluid: the solver passes the particle kind as the group)
first, every other group after it, so key = block * cells + cell. Each update counts the particles
into their keys, prefix-sums the counts and sorts the particles by (key, id) into the buckets so
found (solver/parallel/bucket_sort.py), so the order inside a cell is by particle id on every
backend and every run; `cell_offsets[k]` is the number of live particles with keys below k, and the
fluid are the first `cell_offsets[cells]` particles. Cells along x are consecutive keys, so the
candidates of one row of cells (cy, cz) in one block form one contiguous index range, as in
DualSPHysics (Dominguez et al. 2011, "Neighbour lists in smoothed particle hydrodynamics";
DualSPHysics too keeps its boundary and fluid particles in ranges of their own). With half-support
cells and each row cut to the part the support sphere reaches (rows it misses skipped), a particle
checks about 2.5 times fewer candidates than with the classic 27 cells of the support's size (438
for 174 neighbours at H = sqrt(3) dp); with cells of a third, 333 in about 41 rows instead of 22.
Cells thinner along x cut each row closer to the sphere in the same rows: at the GPUs' search
radius with the skin, 423 candidates a particle with cubic cells of a third, 386 with x_refinement
2, 373 with 3. A GPU warp runs a candidate's pair terms whenever one of its threads has a neighbour
there, so its time follows the candidates: the third is faster on the H200 (seed case 1.29 to 1.06
ms a step, 1M particles 3.58 to 2.77 ms), and x_refinement 2 on top of it 3 to 4 % faster on an
H100 over whole runs, 3 another 1 to 2 % (docs/performance.md, "Cells thinner along x"). Each
refinement adds the cells' offsets again, 23 bytes a particle in the dam-break box at a third:
GPUs take 2, which keeps a run's device arrays within issue 5's 250 bytes a particle (213 at 4M
particles; 260 with 3). The CPU runs one candidate at a time and pays for the extra rows instead
(SPHERIC test 2: 170 against 213 ms a step on the 2-core machine), so it keeps the half; there
x_refinement 3 is within the runs' spread (58 to 60 ms a step with neighbour lists), so it keeps
cubic cells.

The blocks let a pass run over the fluid alone (a contiguous range, whole GPU warps of fluid
particles) or the boundary alone, and let a neighbour loop take fluid and boundary candidates in
loops of their own, with no kind loaded or tested per candidate: the mDBC pass reads only the
fluid around a ghost node, the interaction compiles its fluid and boundary pair terms apart.

Cell coordinates are clamped to the grid (NaN to 0), which keeps every access in range; clamping
moves two coordinates at most as far apart as they were, so no neighbour within the support is
ever missed, even for particles outside the domain. Memory is O(capacity + cells).
"""

import math
from collections.abc import Callable

import numpy as np
import taichi as ti

from solver.parallel.bucket_sort import build_sort_counted, clear
from solver.parallel.scan import scratch_size

I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)

CPU_CELLS_PER_SUPPORT = 2
"""Cells per kernel support on the CPU backends (see the module's docstring)."""
GPU_CELLS_PER_SUPPORT = 3
"""Cells per kernel support on the GPU backends (see the module's docstring)."""
CPU_X_REFINEMENT = 1
"""How many times thinner along x than across the cells are on the CPU backends."""
GPU_X_REFINEMENT = 2
"""How many times thinner along x than across the cells are on the GPU backends."""
DROP_REASONS = 4
BLOCKS = 2
"""Blocks of keys: group 0 (the fluid), then every other group (the boundary)."""
MAX_KEYS = 2**31 - 2
"""Keys of a grid (BLOCKS a cell) that 32-bit cell offsets can number, with a sentinel."""
FLUID_BLOCK = 0


SEARCH_PAD = 1e-3
"""Relative padding of the search radius: far above float32 rounding of coordinates, so a pair
closer than the radius is never missed; the caller's own distance test stays exact."""


@ti.func
def axis_cell(t, size):
    """Cell index along one axis for t = (coordinate - lo) / cell, clamped to [0, size-1].

    NaN and negative t give 0 (every comparison with NaN is false).
    """
    index = 0
    if t >= size:
        index = size - 1
    elif t >= 1.0:
        index = ti.cast(t, ti.i32)
    return index


@ti.func
def cell_coord(p, lo, inv_cell, dims):
    """Integer cell coordinates of position p, clamped to the grid; NaN maps to 0. `inv_cell`
    holds 1 / cell size per axis (`CellGrid.kernel_args`)."""
    c = ti.Vector([0, 0, 0])
    for a in ti.static(range(3)):
        c[a] = axis_cell((p[a] - lo[a]) * inv_cell[a], dims[a])
    return c


@ti.func
def grid_cell_count(dims):
    """The number of cells of a grid of `dims` cells per axis, the keys of one block
    (`CellGrid.num_cells` on the host)."""
    return dims[0] * dims[1] * dims[2]


@ti.func
def cell_key(c, dims):
    """Linear cell number of cell coordinates c (x fastest)."""
    return (c[2] * dims[1] + c[1]) * dims[0] + c[0]


@ti.func
def search_cells(p, radius, lo, inv_cell, dims):
    """First and last cell coordinates, per axis, of the cells a sphere (p, radius) touches.

    Returns a 2x3 integer matrix: row 0 the lowest, row 1 the highest cell on each axis.
    """
    reach = radius * (1.0 + SEARCH_PAD)
    first = ti.Vector([0, 0, 0])
    last = ti.Vector([0, 0, 0])
    for a in ti.static(range(3)):
        first[a] = axis_cell((p[a] - reach - lo[a]) * inv_cell[a], dims[a])
        last[a] = axis_cell((p[a] + reach - lo[a]) * inv_cell[a], dims[a])
    return ti.Matrix.rows([first, last])


@ti.func
def _slab_gap(t, index, size):
    """Distance, in cells, from t = (coordinate - lo) / cell to the slab of cells `index`
    along one axis.

    The first and last slabs reach to infinity, since clamping files particles outside the
    grid into them.
    """
    gap = 0.0
    if index > 0 and t < index:
        gap = index - t
    if index < size - 1 and t > index + 1:
        gap = t - (index + 1)
    return gap


@ti.func
def row_cells(p, radius, cy, cz, lo, inv_cell, dims):
    """[first, end) cell numbers of row (cy, cz) that may hold particles within radius of p.

    The cells of a row are consecutive numbers, so each block's candidates in them are one
    contiguous range (`block_span`); the row is cut to the part the sphere reaches, and is
    empty (first == end) for a row the sphere misses entirely. Distances are in cells across
    (y and z cells are equal) and converted to cells along x by the ratio of the two sizes, a
    division by a kernel argument that compilers hoist out of the rows' loop.
    """
    reach = radius * (1.0 + SEARCH_PAD) * inv_cell[1]
    t = (p - lo) * inv_cell
    gy = _slab_gap(t[1], cy, dims[1])
    gz = _slab_gap(t[2], cz, dims[2])
    rest2 = reach * reach - gy * gy - gz * gz
    first = 0
    end = 0
    if rest2 > 0.0:
        rest = ti.sqrt(rest2) * (inv_cell[0] / inv_cell[1])  # in cells along x
        x0 = axis_cell(t[0] - rest, dims[0])
        x1 = axis_cell(t[0] + rest, dims[0])
        base = (cz * dims[1] + cy) * dims[0]
        first = base + x0
        end = base + x1 + 1
    return ti.Vector([first, end])


@ti.func
def block_span(cells, block, dims, cell_offsets: ti.template()):
    """[begin, end) of the sorted particles of `block` in the cells `cells` of `row_cells`."""
    shift = block * grid_cell_count(dims)
    return ti.Vector([cell_offsets[shift + cells[0]], cell_offsets[shift + cells[1]]])


@ti.func
def fluid_count(n, dims, cell_offsets: ti.template()):
    """The fluid among the first n sorted particles: they come first, before the boundary
    block (at most n, which is 0 in a halted batch)."""
    return ti.min(n, cell_offsets[grid_cell_count(dims)])


@ti.func
def block_key(p, group, lo, inv_cell, dims):
    """The sort key of a particle at p in `group`: its block's cells first, then its cell."""
    block = ti.min(group, 1)
    return block * grid_cell_count(dims) + cell_key(cell_coord(p, lo, inv_cell, dims), dims)


@ti.func
def _assign_keys(
    position: ti.template(),
    removed: ti.template(),
    group: ti.template(),
    n,
    lo,
    inv_cell,
    dims,
    sentinel,
    keys: ti.template(),
    cell_counts: ti.template(),
    dropped: ti.template(),
):
    for i in range(n):
        key = sentinel
        reason = removed[i]
        if reason == 0:
            key = block_key(position[i], group[i], lo, inv_cell, dims)
            ti.atomic_add(cell_counts[key], 1)
        else:
            ti.atomic_add(dropped[ti.min(reason, DROP_REASONS - 1)], 1)
        keys[i] = key


def _build_fill_cells(num_keys: int):
    """A Taichi function sorting a grid of `num_keys` keys, to be called at the top level of a
    kernel: fill_cells(position, ids, removed, group, n, active, lo, inv_cell, dims, keys,
    slot_element, cell_offsets, dropped, scratch, order, sorted_keys) files the first n
    particles' keys, counts them into the cell offsets and sorts them by (key, id) into
    `order` and `sorted_keys` (`build_sort_counted`, solver/parallel/bucket_sort.py). active
    is 1, or 0 (computed on the device) to leave everything as it is. (A select on a condition
    Taichi folds to a constant, as `1 != 0`, fails to compile for SPIR-V: hence the
    products.)"""
    sort_counted = build_sort_counted(num_keys)

    @ti.func
    def fill_cells(
        position: ti.template(),
        ids: ti.template(),
        removed: ti.template(),
        group: ti.template(),
        n,
        active,
        lo,
        inv_cell,
        dims,
        keys: ti.template(),
        slot_element: ti.template(),
        cell_offsets: ti.template(),
        dropped: ti.template(),
        scratch: ti.template(),
        order: ti.template(),
        sorted_keys: ti.template(),
    ):
        clear(cell_offsets, (num_keys + 1) * active)  # active is 0 or 1
        _assign_keys(
            position, removed, group, n * active, lo, inv_cell, dims, num_keys, keys,
            cell_offsets, dropped,
        )  # fmt: skip
        sort_counted(
            keys, ids, n, active, cell_offsets, scratch, slot_element, order, sorted_keys
        )  # fmt: skip

    return fill_cells


def _build_cell_count(num_keys: int, fill_cells):
    """The kernel running `fill_cells` (see `_build_fill_cells`) over a grid of `num_keys`
    keys in one launch; returns the number of live particles."""

    @ti.kernel
    def cell_count(
        position: ti.types.ndarray(ndim=1),
        ids: I32Array,
        removed: I32Array,
        group: I32Array,
        n: ti.i32,
        lo: ti.math.vec3,
        inv_cell: ti.math.vec3,
        dims: ti.math.ivec3,
        keys: I32Array,
        slot_element: I32Array,
        cell_offsets: I32Array,
        dropped: I32Array,
        scratch: I32Array,
        order: I32Array,
        sorted_keys: I32Array,
    ) -> ti.i32:
        fill_cells(
            position, ids, removed, group, n, 1, lo, inv_cell, dims, keys, slot_element,
            cell_offsets, dropped, scratch, order, sorted_keys,
        )  # fmt: skip
        return cell_offsets[num_keys]

    return cell_count


def default_cells_per_support(on_cpu: bool) -> int:
    """The running backend's cells per kernel support (see the module's docstring)."""
    return CPU_CELLS_PER_SUPPORT if on_cpu else GPU_CELLS_PER_SUPPORT


def default_x_refinement(
    on_cpu: bool, lo, hi, support_radius: float, cells_per_support: int
) -> int:
    """The running backend's x refinement of the cells over [lo, hi] (see the module's
    docstring): on GPUs GPU_X_REFINEMENT, or the largest below it whose grid's keys still fit
    32-bit indices (about 80M particles of the dam-break box at 2, 55M at 3)."""
    if on_cpu:
        return CPU_X_REFINEMENT
    for x_refinement in range(GPU_X_REFINEMENT, 1, -1):
        dims = grid_dims(lo, hi, support_radius, cells_per_support, x_refinement)
        if BLOCKS * math.prod(dims) < MAX_KEYS:
            return x_refinement
    return 1


def cell_sizes(
    support_radius: float, cells_per_support: int, x_refinement: int = 1
) -> tuple[float, float, float]:
    """The cell size along x, y and z: support_radius / cells_per_support across, x_refinement
    times thinner along x."""
    across = float(support_radius) / cells_per_support
    return across / x_refinement, across, across


def grid_dims(
    lo,
    hi,
    support_radius: float,
    cells_per_support: int = CPU_CELLS_PER_SUPPORT,
    x_refinement: int = 1,
) -> tuple[int, int, int]:
    """Cells per axis of a grid over [lo, hi] with cells of `cell_sizes`."""
    nx, ny, nz = (
        max(math.ceil((float(top) - float(bottom)) / cell), 1)
        for bottom, top, cell in zip(
            lo, hi, cell_sizes(support_radius, cells_per_support, x_refinement), strict=True
        )
    )
    return nx, ny, nz


class CellGrid:
    """A uniform cell grid over the box [lo, hi] for up to `capacity` particles, with cells of
    support_radius / cells_per_support across, x_refinement times thinner along x.

    Particle ids must be unique. After `update`, `order[i]` (i < live count) is the
    old index of the particle that goes to place i, and `cell_offsets` bounds each cell of each
    block (`num_keys` = BLOCKS x `num_cells` keys).
    """

    def __init__(
        self,
        lo,
        hi,
        support_radius: float,
        capacity: int,
        cells_per_support: int = CPU_CELLS_PER_SUPPORT,
        x_refinement: int = 1,
    ) -> None:
        self.lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        if support_radius <= 0 or np.any(hi <= self.lo):
            raise ValueError("grid needs lo < hi on every axis and a positive support radius")
        self.support_radius = float(support_radius)
        self.cell_sizes = np.array(cell_sizes(self.support_radius, cells_per_support, x_refinement))
        """The cell size along x, y and z [m]."""
        self.dims = np.array(
            grid_dims(self.lo, hi, self.support_radius, cells_per_support, x_refinement),
            dtype=np.int64,
        )
        self.num_cells = int(np.prod(self.dims))
        self.num_keys = BLOCKS * self.num_cells
        if self.num_keys >= MAX_KEYS:
            raise ValueError(f"grid of {self.num_cells} cells is too large for 32-bit keys")
        self.capacity = int(capacity)
        cap = max(self.capacity, 1)
        self.keys = ti.ndarray(ti.i32, shape=cap)
        self.slot_element = ti.ndarray(ti.i32, shape=cap)
        self.sorted_keys = ti.ndarray(ti.i32, shape=cap)
        self.order = ti.ndarray(ti.i32, shape=cap)
        self.cell_offsets = ti.ndarray(ti.i32, shape=self.num_keys + 1)
        self.dropped = ti.ndarray(ti.i32, shape=DROP_REASONS)
        self.dropped.fill(0)
        self._one_group: ti.Ndarray | None = None
        self._scan_scratch = ti.ndarray(ti.i32, shape=scratch_size(self.num_keys + 1))
        self._fill_cells = _build_fill_cells(self.num_keys)
        self._cell_count = _build_cell_count(self.num_keys, self._fill_cells)
        self._kernel_args = (
            ti.Vector(self.lo.tolist()),
            ti.Vector(self.inv_cell.tolist()),
            ti.Vector([int(d) for d in self.dims], dt=ti.i32),
            self.cell_offsets,
        )

    @staticmethod
    def nbytes(num_cells: int, capacity: int) -> int:
        """Device bytes a grid of `num_cells` cells for `capacity` particles allocates (a grid
        updated without groups allocates `capacity` 4-byte zeros more)."""
        cap = max(int(capacity), 1)
        num_keys = BLOCKS * num_cells
        return 4 * (4 * cap + num_keys + 1 + DROP_REASONS) + 4 * scratch_size(num_keys + 1)

    @staticmethod
    def offsets_nbytes(num_cells: int) -> int:
        """Device bytes of the cell offsets and drop counters of a grid of `num_cells` cells
        (what a state carries of the grid: `Simulation.state`)."""
        return 4 * (BLOCKS * num_cells + 1 + DROP_REASONS)

    @property
    def inv_cell(self) -> np.ndarray:
        """1 / cell size per axis."""
        return 1.0 / self.cell_sizes

    def kernel_args(self) -> tuple:
        """(lo, inv_cell, dims, cell_offsets), the grid arguments of a physics kernel; inv_cell
        is a 3-vector."""
        return self._kernel_args

    def update(
        self,
        position: ti.Ndarray,
        ids: ti.Ndarray,
        removed: ti.Ndarray,
        n: int,
        group: ti.Ndarray | None = None,
    ) -> int:
        """Sort the first n particles by (block, cell, id), dropping those with removed[i] != 0.

        `group[i]` = 0 files particle i in the first block, a positive value in the second (the
        solver passes the particle kind: fluid first); None files every particle in the first.
        Returns the number of particles kept; they are the first ones of `order`. `dropped[k]`
        counts, over all updates, the particles dropped with removed[i] == k (k >= 3 pooled).
        """
        if n > self.capacity:
            raise ValueError(f"{n} particles exceed the grid's capacity {self.capacity}")
        if group is None:
            if self._one_group is None:
                self._one_group = ti.ndarray(ti.i32, shape=max(self.capacity, 1))
                self._one_group.fill(0)
            group = self._one_group
        lo, inv_cell, dims, _ = self.kernel_args()
        kept = self._cell_count(
            position, ids, removed, group, n, lo, inv_cell, dims, *self._sort_arrays(),
        )  # fmt: skip
        return int(kept)

    def _sort_arrays(self) -> tuple:
        """The arrays `fill_cells` (`_build_fill_cells`) takes after the grid's dims."""
        return (
            self.keys, self.slot_element, self.cell_offsets, self.dropped, self._scan_scratch,
            self.order, self.sorted_keys,
        )  # fmt: skip

    def build_update_when(self, due: Callable) -> Callable:
        """`update` as one kernel launch that the device decides: the returned
        update_when(position, ids, removed, n, group, control) sorts as `update` does when
        the Taichi function due(control) is true on the device, and changes nothing
        otherwise. It returns nothing, so the host does not wait for it; it drops nothing
        either when called where no particle is flagged (the batch's sort,
        solver/batch_sort.py), so the live count stays n. The grid's lo, inv_cell and dims
        are kernel arguments as in `update`'s kernel: compiled in as constants, CUDA's
        fast math folded the cell computation differently and put a few particles in
        other cells than the host's sort does."""
        fill_cells = self._fill_cells
        lo, inv_cell, dims, _ = self.kernel_args()

        @ti.kernel
        def update_when(
            position: ti.types.ndarray(ndim=1),
            ids: I32Array,
            removed: I32Array,
            group: I32Array,
            n: ti.i32,
            control: ti.types.ndarray(ndim=1),
            lo: ti.math.vec3,
            inv_cell: ti.math.vec3,
            dims: ti.math.ivec3,
            keys: I32Array,
            slot_element: I32Array,
            cell_offsets: I32Array,
            dropped: I32Array,
            scratch: I32Array,
            order: I32Array,
            sorted_keys: I32Array,
        ):
            sorting = ti.select(due(control), 1, 0)
            fill_cells(
                position, ids, removed, group, n, sorting, lo, inv_cell, dims, keys,
                slot_element, cell_offsets, dropped, scratch, order, sorted_keys,
            )  # fmt: skip

        def launch(position, ids, removed, n: int, group, control) -> None:
            update_when(
                position, ids, removed, group, n, control, lo, inv_cell, dims,
                *self._sort_arrays(),
            )  # fmt: skip

        return launch


@ti.kernel
def cell_keys(
    position: ti.types.ndarray(ndim=1),
    group: I32Array,
    n: ti.i32,
    lo: ti.math.vec3,
    inv_cell: ti.math.vec3,
    dims: ti.math.ivec3,
    keys: I32Array,
):
    """keys[i] = the key of particle i as a sort by `CellGrid.update` files it (the same
    functions, so the same bits; key % nx is its cell's column along x): the domain
    decomposition orders and places particles by it."""
    for i in range(n):
        keys[i] = block_key(position[i], group[i], lo, inv_cell, dims)


@ti.kernel
def count_neighbours(
    position: ti.types.ndarray(ndim=1),
    removed: I32Array,
    n: ti.i32,
    radius: float,
    search_radius: float,
    lo: ti.math.vec3,
    inv_cell: ti.math.vec3,
    dims: ti.math.ivec3,
    cell_offsets: I32Array,
    counts: ti.types.ndarray(ndim=1),
):
    """counts[i] = live particles j != i closer than `radius` to particle i (0 if i is removed).

    Candidates come from the cells of the last sort within `search_radius`, which must cover
    how far particles moved since (radius (1 + skin), as the interaction searches). The sum of
    the counts is the number of neighbour interactions of one step, as DualSPHysics counts
    them for its PIPS figure (Dominguez et al. 2013).
    """
    radius2 = radius * radius
    for i in range(n):
        found = 0
        if removed[i] == 0:
            x_i = position[i]
            box = search_cells(x_i, search_radius, lo, inv_cell, dims)
            for cz in range(box[0, 2], box[1, 2] + 1):
                for cy in range(box[0, 1], box[1, 1] + 1):
                    cells = row_cells(x_i, search_radius, cy, cz, lo, inv_cell, dims)
                    for block in ti.static(range(BLOCKS)):
                        span = block_span(cells, block, dims, cell_offsets)
                        for j in range(span[0], span[1]):
                            r2 = (x_i - position[j]).norm_sqr()
                            if j != i and removed[j] == 0 and r2 < radius2:
                                found += 1
        counts[i] = found
