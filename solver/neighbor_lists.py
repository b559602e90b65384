"""Verlet neighbour lists for the CPU's pair halves and mDBC pass.

On the CPU, about 42 ms of a 98.5 ms SPHERIC step (2-core machine) is the walk over the
candidates of the cell rows, most of them failing the support test (docs/performance.md, "Known
headroom"). A Verlet list (Verlet 1967; Dominguez et al. 2011 compare lists with cell walks for
SPH) keeps each particle's candidates, found by one walk at a sort, and the steps until the next
sort read them instead. One array holds them all, a row per sorted particle: entry 0 the list's
length, then the candidates' sorted indices.

- A fluid particle i lists what the pair halves take from it (solver/physics/pair_halves.py):
  the fluid j > i and every boundary particle within (1 + 2 skin) 2H at the sort. Both particles
  of a pair move, each by at most skin 2H before the next sort (the sort schedule of
  `Simulation._sort_if_needed`), so no pair that comes within the support is missing.
- A boundary particle under mDBC lists the fluid within (1 + skin) 2H of its ghost node, which
  does not move (solver/physics/mdbc.py).

The lists are the walk's candidates in the walk's order (rows by (cz, cy), in a row the fluid
block before the boundary block, indices rising), and the readers apply the walk's own tests
(support, removal), so a pass reading the lists adds the same terms in the same order as the
walk: the same bits where every operation is rounded as written (tests/test_neighbor_lists.py,
run without fast math). Under fast math, every run's setting, the compiler may fuse the two
loops' multiplies and adds differently on some CPUs, and the results then differ in the last
bit (solver.backend.start_backend).

The lists cost (HEADER + a row's width) 4-byte integers a particle, the width GROWTH times the
longest list: 1.3 kB at SPHERIC test 2 (rows of 336 entries at H = sqrt(3) dp with a skin of
0.05; 1,673 B of arrays a particle against 329 B without lists); a list longer than the rows
hold makes the rows wider and the lists are built again. They are a CPU option
(`neighbors.lists`): on GPUs the cell walk is the better trade (docs/performance.md, "Verlet
neighbour lists, measured and not built"), for the mDBC pass alone as well ("The mDBC pass from
ghost-node lists on GPUs: measured, not kept").
"""

import math

import taichi as ti

from solver.config import Config
from solver.neighbors import (
    BLOCKS,
    FLUID_BLOCK,
    CellGrid,
    block_span,
    fluid_count,
    row_cells,
    search_cells,
)

LIST_SKIN = 0.05
"""The CPU's default skin with lists: lists of (1 + 2 x 0.05) 2H hold 1.33 times the pairs, and
last until some particle has moved 0.05 x 2H (a sixth of dp at H = sqrt(3) dp)."""
FIRST_WIDTH = 64
"""Candidates a row holds before the first build finds the longest list."""
GROWTH = 1.25
"""How much wider than the longest list the rows are made when one does not fit."""
LATTICE_EXCESS = 1.15
"""How many more points of a cubic lattice a sphere of a few spacings' radius may hold than its
volume in spacings cubed (the count fluctuates by about a tenth with the sphere's centre)."""

I32Array2 = ti.types.ndarray(dtype=ti.i32, ndim=2)


def uses_lists(cfg: Config, pair_halves: bool, skin: float) -> bool:
    """Whether the run keeps neighbour lists: asked for (`neighbors.lists`), with the CPU's
    pair halves (one CPU process, solver/physics/pair_halves.py), and a skin to outlast a
    step."""
    return cfg.neighbors.lists and pair_halves and skin > 0.0


HEADER = 2
"""Entries of a row before its candidates: how many it lists, and how many of them are fluid."""


@ti.func
def list_counts(lists: ti.template(), i):
    """(fluid candidates, all candidates) of particle i's list; the fluid come first."""
    return lists[i, 1], lists[i, 0]


@ti.func
def list_entry(lists: ti.template(), i, e):
    """Candidate e (0-based) of particle i's list."""
    return lists[i, HEADER + e]


def build_list_builder(cfg: Config, skin: float):
    """The kernel that fills the lists (see the module) of the first `n` sorted particles and
    returns the longest list's length, for the grid of the last sort."""
    fluid_radius = cfg.support_radius * (1.0 + 2.0 * skin)
    ghost_radius = cfg.support_radius * (1.0 + skin)
    fluid_radius2, ghost_radius2 = fluid_radius**2, ghost_radius**2
    reach2 = (2.0 * cfg.support_radius) ** 2  # the mDBC pass's `in_reach`
    mdbc = cfg.physics.boundary == "mdbc"

    @ti.func
    def add_block(
        lists: ti.template(),
        i,
        x,
        radius,
        radius2,
        block: ti.template(),
        first,
        length,
        width,
        position: ti.template(),
        lo,
        inv_cell,
        dims,
        cell_offsets: ti.template(),
    ):
        """Append to i's list the particles of `block` from index `first` on within `radius`
        of x, row by row as the walk takes them; the new length (rows full: counted only)."""
        box = search_cells(x, radius, lo, inv_cell, dims)
        for cz in range(box[0, 2], box[1, 2] + 1):
            for cy in range(box[0, 1], box[1, 1] + 1):
                cells = row_cells(x, radius, cy, cz, lo, inv_cell, dims)
                span = block_span(cells, block, dims, cell_offsets)
                for j in range(ti.max(span[0], first), span[1]):
                    if (x - position[j]).norm_sqr() < radius2:
                        if length < width:
                            lists[i, HEADER + length] = j
                        length += 1
        return length

    @ti.kernel
    def build(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        lists: I32Array2,
        n: ti.i32,
        lo: ti.math.vec3,
        inv_cell: ti.math.vec3,
        dims: ti.math.ivec3,
        cell_offsets: ti.types.ndarray(ndim=1),
    ) -> ti.i32:
        fluid = fluid_count(n, dims, cell_offsets)
        width = lists.shape[1] - HEADER
        longest = 0
        for i in range(n):
            fluid_length = 0
            length = 0
            if i < fluid:
                x = position[i]
                length = add_block(
                    lists, i, x, fluid_radius, fluid_radius2, FLUID_BLOCK, i + 1, 0, width,
                    position, lo, inv_cell, dims, cell_offsets,
                )  # fmt: skip
                fluid_length = length
                for block in ti.static(range(BLOCKS)):
                    if ti.static(block != FLUID_BLOCK):
                        length = add_block(
                            lists, i, x, fluid_radius, fluid_radius2, block, 0, length, width,
                            position, lo, inv_cell, dims, cell_offsets,
                        )  # fmt: skip
            else:
                if ti.static(mdbc):
                    g = ghost[i]
                    if g.dot(g) <= reach2:
                        length = add_block(
                            lists, i, position[i] + g, ghost_radius, ghost_radius2,
                            FLUID_BLOCK, 0, 0, width, position, lo, inv_cell, dims,
                            cell_offsets,
                        )  # fmt: skip
                        fluid_length = length
            lists[i, 0] = ti.min(length, width)
            lists[i, 1] = ti.min(fluid_length, width)
            ti.atomic_max(longest, length)
        return longest

    return build


class NeighbourLists:
    """The lists of up to `capacity` particles (see the module), rebuilt by `build` after each
    sort."""

    def __init__(self, cfg: Config, skin: float, capacity: int) -> None:
        self.capacity = max(int(capacity), 1)
        self._build = build_list_builder(cfg, skin)
        self.lists = ti.ndarray(ti.i32, shape=(self.capacity, HEADER + FIRST_WIDTH))

    @property
    def width(self) -> int:
        """Candidates a row holds."""
        return int(self.lists.shape[1]) - HEADER

    def nbytes(self) -> int:
        """Bytes the lists take now."""
        return 4 * self.capacity * (HEADER + self.width)

    @staticmethod
    def nbytes_bound(cfg: Config, capacity: int, skin: float) -> int:
        """Bytes the lists of `capacity` particles take at most in a case whose particles
        keep about the lattice's spacing dp: the rows as wide as a sphere of the fluid lists'
        radius holds lattice points (its volume in dp^3, and LATTICE_EXCESS more), widened by
        GROWTH. No list is longer: a fluid particle lists half its fluid neighbours and the
        boundary around it, a ghost node only fluid, within a smaller radius."""
        radius = cfg.support_radius * (1.0 + 2.0 * skin) / cfg.dp
        width = int(GROWTH * LATTICE_EXCESS * 4.0 / 3.0 * math.pi * radius**3) + 1
        return 4 * max(int(capacity), 1) * (HEADER + width)

    def build(self, position: ti.Ndarray, ghost: ti.Ndarray, n: int, grid: CellGrid) -> None:
        """Fill the lists of the first n sorted particles from the grid of the last sort,
        widening the rows (and filling them again) when a list does not fit."""
        longest = self._build(position, ghost, self.lists, n, *grid.kernel_args())
        if longest > self.width:
            width = int(longest * GROWTH) + 1
            self.lists = ti.ndarray(ti.i32, shape=(self.capacity, HEADER + width))
            self._build(position, ghost, self.lists, n, *grid.kernel_args())
