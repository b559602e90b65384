"""The work list of the mDBC pass: the boundary particles with fluid near their ghost node.

The mDBC pass (solver/physics/mdbc.py) gives every boundary particle within the fluid's reach
the density extrapolated from the fluid around its ghost node. Most of a tank's wall is dry at
any moment: in the seed case and SPHERIC test 2 (dp 0.017 and 0.04 on the CPU, the dam breaking
and after the impact) 30 to 60 % of the boundary particles have a fluid particle within the
search radius of their ghost node, the rest none. A dry particle still walked the rows of cells
around its ghost node at every step, to find nothing and keep rho0: at the seed case's start
on the H200 the pass cost 268 us a step against the interaction's 634, though two thirds of the
walls were dry (docs/performance.md, "Fluid and boundary in blocks of their own").

The cells are refiled only at a sort, and between two sorts no particle moves farther than the
skin: a fluid particle that comes within the support of a ghost node before the next sort lay
within the search radius (support plus skin) of it at the sort, as the interaction's cell walk
assumes (Verlet 1967; Dominguez et al. 2011, "Neighbour lists in smoothed particle
hydrodynamics"). So a boundary particle with no fluid candidate in those cells at a sort finds
none until the next one, and keeps rho0 meanwhile. Right after each sort, `WetBoundary` marks
the particles of the boundary block that have a candidate (`BoundaryDensity.reaches_fluid`),
gives the others rho0 and its pressure once (`BoundaryDensity.set_rest`), and lists the marked
ones in order, by an inclusive prefix sum of the marks (solver/parallel/scan.py) and a scatter:
the list is the same on every backend and every run. The pass then runs over the list alone;
each particle it computes is computed as before, so a run gives the same bits as with the
whole block.

The array `wet` holds the list's length in element 0 and the particles' indices after it;
`flags` the marks, then their prefix sums. Both have one element a particle of capacity (the
boundary block is at most that long), 8 bytes a particle in all.
"""

from collections.abc import Callable

import taichi as ti

from solver.neighbors import CellGrid, fluid_count
from solver.parallel.scan import build_scan, scratch_size
from solver.physics.mdbc import BoundaryDensity

Array = ti.types.ndarray(ndim=1)
I32Array = ti.types.ndarray(dtype=ti.i32, ndim=1)


class WetBoundary:
    """The mDBC pass's work list (see the module) of a simulation of up to `capacity`
    particles on `grid`, refreshed after each of its sorts."""

    def __init__(self, boundary: BoundaryDensity, grid: CellGrid, capacity: int) -> None:
        size = max(int(capacity), 1)
        self.wet = ti.ndarray(ti.i32, shape=size + 1)
        """The list: its length, then the indices of the wet boundary particles in order."""
        self.flags = ti.ndarray(ti.i32, shape=size)
        self.scratch = ti.ndarray(ti.i32, shape=scratch_size(size))
        self.wet.fill(0)
        self._grid = grid
        self._refresh = _build_refresh(boundary, build_scan(size, inclusive=True))

        refresh = self._refresh

        @ti.kernel
        def refresh_now(
            position: Array, ghost: Array, density: Array, pressure: Array, n: ti.i32,
            lo: ti.math.vec3, inv_cell: ti.math.vec3, dims: ti.math.ivec3,
            cell_offsets: I32Array, wet: I32Array, flags: I32Array, scratch: I32Array,
        ):  # fmt: skip
            refresh(
                1, position, ghost, density, pressure, n, lo, inv_cell, dims, cell_offsets,
                wet, flags, scratch,
            )  # fmt: skip

        self._refresh_now = refresh_now

    @staticmethod
    def nbytes(capacity: int) -> int:
        """Bytes of the arrays of a list for `capacity` particles."""
        size = max(int(capacity), 1)
        return 4 * (2 * size + 1 + scratch_size(size))

    def update(self, position, ghost, density, pressure, n: int) -> None:
        """Refresh the list for the first `n` particles as the grid's last sort filed them."""
        lo, inv_cell, dims, offsets = self._grid.kernel_args()
        self._refresh_now(
            position, ghost, density, pressure, n, lo, inv_cell, dims, offsets, self.wet,
            self.flags, self.scratch,
        )  # fmt: skip

    def build_update_when(self, due: Callable, mark_sorted: Callable) -> Callable:
        """`update` as a launch the device decides, for the sort a batch queues
        (solver/batch_sort.py): the returned update_when(position, ghost, density, pressure, n,
        control) refreshes the list when the Taichi function due(control) is true, then records
        the sort with mark_sorted(control) (the queued sort's last launch), and changes nothing
        otherwise."""
        refresh = self._refresh
        lo, inv_cell, dims, offsets = self._grid.kernel_args()

        @ti.kernel
        def refresh_when(
            position: Array, ghost: Array, density: Array, pressure: Array, n: ti.i32,
            control: Array, lo: ti.math.vec3, inv_cell: ti.math.vec3, dims: ti.math.ivec3,
            cell_offsets: I32Array, wet: I32Array, flags: I32Array, scratch: I32Array,
        ):  # fmt: skip
            sorting = ti.select(due(control), 1, 0)
            refresh(
                sorting, position, ghost, density, pressure, n, lo, inv_cell, dims,
                cell_offsets, wet, flags, scratch,
            )  # fmt: skip
            if sorting:
                mark_sorted(control)

        def launch(position, ghost, density, pressure, n: int, control) -> None:
            refresh_when(
                position, ghost, density, pressure, n, control, lo, inv_cell, dims, offsets,
                self.wet, self.flags, self.scratch,
            )  # fmt: skip

        return launch


def _build_refresh(boundary: BoundaryDensity, scan: Callable) -> Callable:
    """The refresh of a list (see the module), a Taichi function to call at a kernel's top
    level: refresh(sorting, position, ghost, density, pressure, n, lo, inv_cell, dims,
    cell_offsets, wet, flags, scratch) for the first `n` sorted particles where `sorting` is 1,
    nothing where it is 0; `scan` is an inclusive scan of `flags`' length."""
    reaches_fluid, set_rest = boundary.reaches_fluid, boundary.set_rest

    @ti.func
    def refresh(
        sorting, position: ti.template(), ghost: ti.template(), density: ti.template(),
        pressure: ti.template(), n, lo, inv_cell, dims, cell_offsets: ti.template(),
        wet: ti.template(), flags: ti.template(), scratch: ti.template(),
    ):  # fmt: skip
        first = fluid_count(n, dims, cell_offsets)
        count = ti.select(sorting, n - first, 0)  # the boundary block, or nothing
        for t in range(count):
            i = first + t
            mark = 0
            if reaches_fluid(i, position, ghost, lo, inv_cell, dims, cell_offsets):
                mark = 1
            else:
                set_rest(i, density, pressure)
            flags[t] = mark
        scan(flags, flags, count, scratch)  # inclusive: the marks up to and with t
        for t in range(count):
            before = 0
            if t > 0:
                before = flags[t - 1]
            if flags[t] > before:
                wet[flags[t]] = first + t  # entry flags[t] - 1 of the list, after its length
        if sorting:
            listed = 0
            if count > 0:
                listed = flags[count - 1]
            wet[0] = listed

    return refresh
