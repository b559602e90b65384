"""Modified dynamic boundary condition (mDBC): boundary density from the fluid at a ghost node.

English, Dominguez, Vacondio, Crespo, Stansby, Lind, Chiapponi and Gomez-Gesteira (2022),
"Modified dynamic boundary conditions (mDBC) for general-purpose smoothed particle
hydrodynamics (SPH): application to tank sloshing, dam break and fish pass problems",
Computational Particle Mechanics 9, 1-15, section 2.

Every boundary particle b has a ghost node x_g = x_b + g_b, its mirror image through the
boundary surface (the scene's `ghost` vectors; the surface lies dp/2 beyond the innermost
layer). The fluid density around the ghost node is extrapolated to first order (a linear
field, corrected by the kernel moments as in Liu and Liu 2006), as the paper describes:

    A [rho_g, grad rho_g] = b,
    A = [ sum V_j W_gj         sum V_j (x_j - x_g)^T W_gj         ]
        [ sum V_j grad W_gj    sum V_j grad W_gj (x) (x_j - x_g)  ],
    b = [ sum m_j W_gj, sum m_j grad W_gj ]

over fluid neighbours j of the ghost node (V_j = m_j / rho_j), and the boundary particle takes
the value of that linear field at its own position, rho_b = rho_g + (x_b - x_g) . grad rho_g.
Where the matrix is ill-conditioned (|det| below DETERMINANT_LIMIT: too few fluid neighbours
around the ghost node for a gradient, e.g. at the free surface) the paper falls back to the
Shepard-normalised zeroth-order value rho_s = sum m_j W_gj / sum V_j W_gj; with no fluid
neighbour at all the particle keeps rho0.

The Shepard value is the water's density at the kernel-weighted centroid of its neighbours,
x_s = sum V_j x_j W_gj / sum V_j W_gj, not at the boundary particle: where the fallback applies
the fit has no gradient to carry it across, so the hydrostatic one takes its place, as in the
wall pressure of Adami, Hu and Adams (2012), "A generalized wall boundary condition for smoothed
particle hydrodynamics", J. Comput. Phys. 231, 7057-7075, eq. 27 (p_w = p_f + rho_f g . (x_w -
x_f), averaged over the fluid; the walls here do not accelerate). In density, through the
equation of state linearised at rest (dp = c0^2 drho):

    rho_b = rho_s (1 + g . (x_b - x_s) / c0^2).

A wall particle above the water's edge (one layer over a still surface, its ghost node in the
air) then takes the density of the water at its own height, which is rho0 or less (clamped to
rho0, below), instead of the density of the water below it: without the term, the still-water
tank's top layer stood 1.44 dp off the side walls after 2 s, with it 1.21 dp (CPU,
tests/test_still_water_mdbc.py; validation/README.md, section 4).

A boundary particle deeper below the surface than the kernel support 2H (|g| / 2 > 2H: inside
a solid obstacle, or deep in a wall's corner) can have no fluid within its support, so its
density acts on nothing: the pass skips it and it keeps rho0 (`in_reach`). The ghost nodes of
these particles lie far into the water (up to the obstacle's half-width): searching around them
would only cost time, and under MPI would need ghost layers as wide as the obstacle.

The result is clamped to rho0 from below: the wall is non-adhesive, it pushes water but never
pulls it (the same unilateral treatment SPlisHSPlasH's WCSPH applies to every particle's
density before its equation of state). This is our choice, not the paper's: DualSPHysics 5.x
stores the extrapolated density unclamped. Measured on SPHERIC test 2 (validation/README.md,
"mDBC clamp"), the unclamped wall doubles the tension at the impact (P3/P4 1 ms minima -38 and
-59 kPa against -10 and -25 kPa at dp 0.02) and lets water leave the density band at dp 0.01,
while neither variant moves the 20 ms P1 peak consistently.

The matrix is assembled in units of h (positions r / h, gradients h grad W), which leaves its
determinant unchanged and keeps every entry of order one in float32.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import taichi as ti

from solver.config import Config
from solver.neighbor_lists import list_counts, list_entry
from solver.neighbors import FLUID_BLOCK, block_span, fluid_count, row_cells, search_cells
from solver.parallel.spread_order import spread_index, spread_length
from solver.physics import eos
from solver.physics.shared_formula import taichi_func
from solver.physics.smoothing_kernels import kernel_functions
from solver.physics.solve_4x4 import determinant_and_adjugate_product

tait_pressure = taichi_func(eos.tait_pressure)
solve_4x4 = taichi_func(determinant_and_adjugate_product)

DETERMINANT_LIMIT = 1e-3
"""|det A| below which the first-order correction is replaced by the Shepard value. A is the
dimensionless moment matrix above, with det A = 1 for a full kernel support, so 1e-3 keeps the
fit wherever the ghost node has a usable neighbourhood on more than one side (our choice of
the paper's threshold, not tuned to any case)."""


def in_reach(ghost: np.ndarray, support: float) -> np.ndarray:
    """(N,) mask of the boundary particles the pass computes: those at most the kernel support
    `support` (2H) below the surface, |g| <= 2 support (see the module)."""
    return np.einsum("ij,ij->i", ghost, ghost) <= (2.0 * support) ** 2


class BoundaryDensity(NamedTuple):
    """The mDBC pass as a kernel, and as the Taichi function `loop` over the boundary block of
    the first `live` sorted particles (fused kernels call it before the interaction), whose
    last argument is () or the neighbour lists in a tuple."""

    kernel: Callable
    listed_kernel: Callable
    """The kernel reading neighbour lists (solver/neighbor_lists.py), their array last: the
    CPU's. A kernel of its own, so that `kernel`, which GPUs run, keeps its arguments (one
    buffer fewer under Metal's limit) and the code the GPUs were measured with."""
    loop: Callable


def build_boundary_density(
    cfg: Config, skin: float = 0.0, spread_order: bool = False
) -> BoundaryDensity:
    """The mDBC pass for `cfg`, its constants compiled in: sets the density and pressure of
    every boundary particle from the fluid around its ghost node; fluid particles are left
    untouched. Candidates are searched within (1 + skin) 2H of the ghost node (boundary
    particles do not move, so the skin argument of the interaction holds here too). With
    `spread_order` (the CPU) the loop takes the boundary block in the order of
    solver/parallel/spread_order.py, so that the wet wall particles, which sit together in the
    sort, are shared among the threads; the results are the same bits."""
    kernel_w, kernel_f = (taichi_func(f) for f in kernel_functions(cfg.physics.kernel))
    h = cfg.smoothing_length
    inv_h = 1.0 / h
    support2 = cfg.support_radius**2
    reach2 = (2.0 * cfg.support_radius) ** 2  # |g|^2 of the deepest particle computed
    search_radius = cfg.support_radius * (1.0 + skin)
    mass = cfg.particle_mass
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    hydrostatic = ti.Vector(cfg.physics.gravity) / cfg.sound_speed**2  # grad rho / rho at rest

    @ti.func
    def assemble_moments(volume_w, volume_w_r, volume_f_r, volume_f_rr, sum_w, sum_f_r):
        """A and b of the module from their distinct sums (r = x_g - x_j, grad_g W_gj = F_gj r,
        positions in units of h and gradients times h): A_00 = sum V W; A_0k = sum V W (x_j -
        x_g)_k / h = -(sum V W r)_k / h; A_k0 = h (sum V F r)_k; A_kl = sum V (h F r_k)(-r_l /
        h) = -(sum V F r r^T)_kl, symmetric; b_0 = m sum W, b_k = m h (sum F r)_k. The pass
        sums 13 + 4 quantities a pair instead of 16 + 4: the pass about 7 % shorter on the
        2-core CPU, the same time on an H100 (docs/performance.md, "The fluid pairs once each
        on the CPU")."""
        a = ti.Matrix.zero(float, 4, 4)
        a[0, 0] = volume_w
        for k in ti.static(range(3)):
            a[0, k + 1] = -volume_w_r[k] * inv_h
            a[k + 1, 0] = volume_f_r[k] * h
        a[1, 1] = -volume_f_rr[0]
        a[1, 2] = a[2, 1] = -volume_f_rr[1]
        a[1, 3] = a[3, 1] = -volume_f_rr[2]
        a[2, 2] = -volume_f_rr[3]
        a[2, 3] = a[3, 2] = -volume_f_rr[4]
        a[3, 3] = -volume_f_rr[5]
        b = ti.Vector([sum_w * mass, 0.0, 0.0, 0.0])
        for k in ti.static(range(3)):
            b[k + 1] = sum_f_r[k] * (mass * h)
        return a, b

    @ti.func
    def add_fluid_neighbour(
        x_g: ti.template(),
        j: ti.template(),
        position: ti.template(),
        density: ti.template(),
        removed: ti.template(),
        volume_w: ti.template(),
        volume_w_r: ti.template(),
        volume_f_r: ti.template(),
        volume_f_rr: ti.template(),
        sum_w: ti.template(),
        sum_f_r: ti.template(),
    ):
        """Add fluid particle j's terms to a ghost node's sums (see `assemble_moments`) if it
        lies within the support of x_g. Every argument is a template, passed by reference, so
        that the call adds no local copies to the GPU kernels (solver/physics/interaction.py,
        `Interaction.gather`)."""
        r = x_g - position[j]
        r2 = r.norm_sqr()
        if r2 < support2 and removed[j] == 0:
            distance = ti.sqrt(r2)
            w = kernel_w(distance, h)
            f = kernel_f(distance, h)  # grad_g W_gj = F_gj r
            volume = mass / density[j]
            f_r = f * r
            volume_f = volume * f_r
            volume_w += volume * w
            volume_w_r += (volume * w) * r
            volume_f_r += volume_f
            volume_f_rr += ti.Vector(
                [
                    volume_f[0] * r[0],
                    volume_f[0] * r[1],
                    volume_f[0] * r[2],
                    volume_f[1] * r[1],
                    volume_f[1] * r[2],
                    volume_f[2] * r[2],
                ]
            )
            sum_w += w
            sum_f_r += f_r

    @ti.func
    def ghost_density(
        i,
        position: ti.template(),
        ghost: ti.template(),
        density: ti.template(),
        removed: ti.template(),
        lo,
        inv_cell,
        dims,
        cell_offsets: ti.template(),
        lists: ti.template(),
    ):
        """The mDBC density of boundary particle i, over the fluid of its neighbour list where
        `lists` holds one (solver/neighbor_lists.py), else of the cells around its ghost node."""
        g = ghost[i]
        x_g = position[i] + g
        # The thirteen distinct sums of A and the four of b (see `assemble_moments`), r = x_g - x_j
        volume_w = 0.0  # sum V_j W_gj
        volume_w_r = ti.Vector.zero(float, 3)  # sum V_j W_gj r
        volume_f_r = ti.Vector.zero(float, 3)  # sum V_j F_gj r
        volume_f_rr = ti.Vector.zero(float, 6)  # sum V_j F_gj r r^T: xx, xy, xz, yy, yz, zz
        sum_w = 0.0  # sum W_gj
        sum_f_r = ti.Vector.zero(float, 3)  # sum F_gj r
        if ti.static(len(lists) > 0):
            for e in range(list_counts(lists[0], i)[1]):
                j = list_entry(lists[0], i, e)
                add_fluid_neighbour(
                    x_g, j, position, density, removed, volume_w, volume_w_r, volume_f_r,
                    volume_f_rr, sum_w, sum_f_r,
                )  # fmt: skip
        else:
            box = search_cells(x_g, search_radius, lo, inv_cell, dims)
            for cz in range(box[0, 2], box[1, 2] + 1):
                for cy in range(box[0, 1], box[1, 1] + 1):
                    cells = row_cells(x_g, search_radius, cy, cz, lo, inv_cell, dims)
                    span = block_span(cells, FLUID_BLOCK, dims, cell_offsets)  # the fluid alone
                    for j in range(span[0], span[1]):
                        add_fluid_neighbour(
                            x_g, j, position, density, removed, volume_w, volume_w_r,
                            volume_f_r, volume_f_rr, sum_w, sum_f_r,
                        )  # fmt: skip
        moments, rhs = assemble_moments(
            volume_w, volume_w_r, volume_f_r, volume_f_rr, sum_w, sum_f_r
        )
        rho = rho0
        if moments[0, 0] > 0.0:
            # det A and adj(A) rhs, whose ratio is (rho_g, h grad rho_g)
            det, y0, y1, y2, y3 = solve_4x4(moments, rhs)
            if ti.abs(det) >= DETERMINANT_LIMIT:
                rho = (y0 - (y1 * g[0] + y2 * g[1] + y3 * g[2]) * inv_h) / det
            else:
                rho = rhs[0] / moments[0, 0]  # Shepard, at the centroid x_s
                to_centroid = ti.Vector([moments[0, 1], moments[0, 2], moments[0, 3]])
                to_centroid *= h / moments[0, 0]  # x_s - x_g
                rho += rho * hydrostatic.dot(-g - to_centroid)  # carried to x_b = x_g - g
        return ti.max(rho, rho0)

    @ti.func
    def boundary_particle(
        i,
        position: ti.template(),
        ghost: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        removed: ti.template(),
        lo,
        inv_cell,
        dims,
        cell_offsets: ti.template(),
        lists: ti.template(),
    ):
        """Set density and pressure of boundary particle i. Called for boundary particles only
        (the sort's boundary block, from `fluid_count` on), so its kind is not tested. `lists`
        is () or holds the neighbour lists (`ghost_density`)."""
        rho = rho0  # beyond the fluid's reach (`in_reach`)
        g = ghost[i]
        if g.dot(g) <= reach2:
            rho = ghost_density(
                i, position, ghost, density, removed, lo, inv_cell, dims, cell_offsets, lists
            )
        density[i] = rho
        pressure[i] = tait_pressure(rho, rho0, b, gamma)

    @ti.func
    def loop(
        live: ti.template(),
        position: ti.template(),
        ghost: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        removed: ti.template(),
        lo: ti.template(),
        inv_cell: ti.template(),
        dims: ti.template(),
        cell_offsets: ti.template(),
        lists: ti.template(),
    ):
        """The pass over the boundary block of the first `live` sorted particles, a parallel
        loop when called at a kernel's top level. Every argument is a template, so that GPU
        kernels get the loop as they had it inline (solver/physics/interaction.py,
        `Interaction.gather`)."""
        if ti.static(spread_order):
            first = fluid_count(live, dims, cell_offsets)
            for t in range(spread_length(live - first)):
                i = first + spread_index(t, live - first)
                if i < live:
                    boundary_particle(
                        i, position, ghost, density, pressure, removed, lo, inv_cell, dims,
                        cell_offsets, lists,
                    )  # fmt: skip
        else:
            for i in range(fluid_count(live, dims, cell_offsets), live):  # the boundary block
                boundary_particle(
                    i, position, ghost, density, pressure, removed, lo, inv_cell, dims,
                    cell_offsets, lists,
                )  # fmt: skip

    @ti.kernel
    def boundary_density(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        lo: ti.math.vec3,
        inv_cell: ti.math.vec3,
        dims: ti.math.ivec3,
        cell_offsets: ti.types.ndarray(ndim=1),
    ):
        loop(n, position, ghost, density, pressure, removed, lo, inv_cell, dims, cell_offsets, ())

    @ti.kernel
    def boundary_density_listed(
        position: ti.types.ndarray(ndim=1),
        ghost: ti.types.ndarray(ndim=1),
        density: ti.types.ndarray(ndim=1),
        pressure: ti.types.ndarray(ndim=1),
        removed: ti.types.ndarray(ndim=1),
        n: ti.i32,
        lo: ti.math.vec3,
        inv_cell: ti.math.vec3,
        dims: ti.math.ivec3,
        cell_offsets: ti.types.ndarray(ndim=1),
        lists: ti.types.ndarray(dtype=ti.i32, ndim=2),
    ):
        loop(
            n, position, ghost, density, pressure, removed, lo, inv_cell, dims, cell_offsets,
            (lists,),
        )  # fmt: skip

    return BoundaryDensity(boundary_density, boundary_density_listed, loop)
