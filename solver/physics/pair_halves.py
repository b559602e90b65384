"""The interaction's fluid pairs taken once each, on the CPU: a half stencil with per-chunk sums.

The gather pass (solver/physics/interaction.py) visits every fluid pair twice, once from each
side, and each thread writes only its own particle's sums, which a GPU needs. A CPU thread can
instead take each fluid pair (i, j) once, from the lower sorted index i, and add the pair's
share to both particles: the forces are opposite and equal (the symmetric pressure term of
Monaghan 1992 with his artificial viscosity, both symmetric in i and j), the continuity terms
m v_ij . grad_i W_ij equal, and the density diffusion (Fourtakas et al. 2019, or Molteni and
Colagrossi 2009) is evaluated for each side with its own densities. That halves the fluid
pairs' arithmetic and their candidates, the molecular-dynamics codes' "Newton's third law"
half neighbour list (LAMMPS' `newton on`). A fluid particle's pairs with the boundary are all
taken from the fluid side, as in the gather: under mDBC a boundary particle sums nothing, under
DBC its continuity sum is gathered by its own loop after the fluid's (the gather's function).

Every pair is found from its lower index: the candidates of particle i are those of the gather
(its rows of cells within the search radius, which is symmetric), cut to sorted indices above
i, so the scheme holds whatever the skin and wherever particles have moved since the sort.

Determinism. The fluid block is cut into PAIR_CHUNKS chunks of consecutive particles, each run
by one thread in order, adding to a sum array of its own (`PairSums`); a last loop adds each
particle's PAIR_CHUNKS sums in chunk order and clears them for the next pass. The order of every
sum is fixed by the sort alone, so the results are the same bits for any number of threads and
on every run; they differ from the gather's by the rounding of another order of summation (a
test holds the two within float32 rounding, tests/test_physics.py). The chunk count is fixed,
not the thread count: PAIR_CHUNKS threads at most share the pass.

Where the chunks fall depends on the particles a process holds, so several processes (solver/
distributed/), whose results equal one process's bit for bit with the gather, keep the gather;
`neighbors.pair_halves = false` makes a one-process CPU run gather too, the reference several
processes reproduce exactly.

Measured on the 2-core machine (SPHERIC test 2 at dp 0.02, `dambreak bench`; docs/performance.md,
"The fluid pairs once each on the CPU"): the interaction 72 ms against the gather's 98 ms, the
whole step 111 to 118 ms against 140 to 150 ms. With neighbour lists (solver/neighbor_lists.py,
on by default) a particle's candidates come from its list instead of the cell rows, in the
walk's order, so the same bits without fast math (solver/neighbor_lists.py): the interaction
43 to 45 ms, the step 65 to 70 ms
(docs/performance.md, "Neighbour lists on the CPU").

Only the artificial viscosity is covered: with laminar + SPS the velocity gradient a particle
needs for its stress would have to be summed the same way (nine more sums a particle), and the
gather does it (`uses_pair_halves`).
"""

from collections.abc import Callable

import taichi as ti

from solver.config import Config
from solver.counting_region import counted_here
from solver.neighbor_lists import list_counts, list_entry
from solver.neighbors import BLOCKS, FLUID_BLOCK, block_span, fluid_count, row_cells, search_cells
from solver.parallel.reduce import merge_max
from solver.physics import density_diffusion, viscosity
from solver.physics.shared_formula import taichi_func
from solver.physics.smoothing_kernels import kernel_functions

monaghan_pi = taichi_func(viscosity.monaghan_pi)
diffusion_pair_term = taichi_func(density_diffusion.diffusion_pair_term)
hydrostatic_density_difference = taichi_func(density_diffusion.hydrostatic_density_difference)

PAIR_CHUNKS = 16
"""Chunks of the fluid block, each summed by one thread into arrays of its own: the most
threads the pass can use, fixed so that the results do not depend on the thread count. (A
chunk's bounds c * fluid // PAIR_CHUNKS are 32-bit: fluid blocks up to 2^31 / PAIR_CHUNKS,
134M particles.)"""

CHUNK_STRIDE = 512
"""Iterations of the chunk loop per chunk. Taichi 1.7.4's CPU backend hands a parallel loop to
its threads in blocks of iterations, up to 512 each: a loop of 16 iterations ran on one thread
(measured). Chunk c runs at iteration c * CHUNK_STRIDE, the other iterations are empty, so
each chunk is a block of its own and the blocks spread over the threads."""


@ti.func
def folded_chunk(slot):
    """The chunk run at loop slot `slot`: 0, PAIR_CHUNKS - 1, 1, PAIR_CHUNKS - 2, ... Taichi's
    CPU backend hands each thread a contiguous run of slots (solver/parallel/spread_order.py),
    and the chunks' work falls from the bottom of the water, whose particles list the floor,
    to its surface: folded, every run of slots pairs heavy chunks with light ones. Which thread
    runs a chunk does not change its sums, so the results are the same bits."""
    return slot // 2 if slot % 2 == 0 else PAIR_CHUNKS - 1 - slot // 2


SUM_COMPONENTS = 4
"""A particle's sums in one chunk: its acceleration (3) and density rate (1)."""


def uses_pair_halves(arch: str, cfg: Config, single_process: bool) -> bool:
    """Whether the interaction takes its fluid pairs once each: where `neighbors.pair_halves`
    asks it, on the CPU backend (arch as solver.backend.running_arch names it), with the
    artificial viscosity, in one process (see the module)."""
    return (
        cfg.neighbors.pair_halves
        and arch == "cpu"
        and cfg.physics.viscosity != "laminar_sps"
        and single_process
    )


class PairSums:
    """The chunks' sum arrays: (PAIR_CHUNKS, fluid capacity) vectors of SUM_COMPONENTS reals,
    zero between passes (the pass's last loop clears what it reads)."""

    def __init__(self, fluid_capacity: int, dtype) -> None:
        self.sums = ti.Vector.ndarray(
            SUM_COMPONENTS, dtype, shape=(PAIR_CHUNKS, max(fluid_capacity, 1))
        )
        self.sums.fill(0)

    @staticmethod
    def nbytes(fluid_capacity: int, real_bytes: int) -> int:
        """Bytes that `PairSums(fluid_capacity, ...)` allocates."""
        return PAIR_CHUNKS * max(fluid_capacity, 1) * SUM_COMPONENTS * real_bytes


def build_pair_halves(cfg: Config, skin: float, gather_particle: Callable) -> Callable:
    """The interaction pass with each fluid pair taken once, as a Taichi function whose loops
    stay parallel when called at a kernel's top level. `gather_particle` is the gather's
    particle function (solver/physics/interaction.py), which the boundary block runs under DBC.

    The function takes the gather kernel's arrays, `live` particles, and last the `sums` array
    of a `PairSums`."""
    gradient_factor = taichi_func(kernel_functions(cfg.physics.kernel)[1])
    h = cfg.smoothing_length
    support2 = cfg.support_radius**2
    search_radius = cfg.support_radius * (1.0 + skin)
    fluid_mass, boundary_mass = cfg.particle_mass, cfg.boundary_particle_mass
    c0 = cfg.sound_speed
    alpha = cfg.physics.visc_alpha
    eta2 = cfg.eta2
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma
    delta = cfg.physics.delta
    diffusion = cfg.physics.density_diffusion
    gx, gy, gz = cfg.physics.gravity
    boundary_rates = cfg.physics.boundary == "dbc"

    @ti.func
    def pair(
        i,
        j,
        c,
        fluid_j: ti.template(),
        r_ij,
        r2,
        own: ti.template(),
        position: ti.template(),
        velocity: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        region,
        density_prev: ti.template(),
        lagged,
        sums: ti.template(),
        acc: ti.template(),
        rate: ti.template(),
        visc: ti.template(),
    ):
        """The terms of the pair (i, j) within the support: i's added to acc, rate and visc,
        and under `fluid_j` j's to chunk c's sums. `own` holds i's values (`own_values`)."""
        v_i, rho_i, rho_diffused_i, inv_rho_diffused_i, p_i, inv_rho_i, counted_i = own
        mass = ti.static(fluid_mass if fluid_j else boundary_mass)  # m_j
        f = gradient_factor(ti.sqrt(r2), h)
        grad = r_ij * f  # grad_i W_ij = -grad_j W_ji
        v_ij = v_i - velocity[j]
        continuity = mass * v_ij.dot(grad)  # the same for j (m_i = m_j)
        rho_j = density[j]
        inv_rho_j = 1.0 / rho_j
        inv_r2_eta2 = 1.0 / (r2 + eta2)
        v_dot_r = v_ij.dot(r_ij)
        pressure_term = (p_i + pressure[j]) * inv_rho_i * inv_rho_j
        pi_ij = monaghan_pi(v_dot_r, inv_r2_eta2, 0.5 * (rho_i + rho_j), h, alpha, c0)
        force = mass * (pressure_term + pi_ij) * grad
        acc -= force
        rate += continuity
        if counted_i or counted_here(position[j], region):
            visc = ti.max(visc, ti.abs(v_dot_r) * inv_r2_eta2)
        if ti.static(fluid_j):
            rate_j = continuity
            if ti.static(diffusion != "none"):
                rho_diffused_j = rho_j
                inv_rho_diffused_j = inv_rho_j
                if lagged:
                    rho_diffused_j = density_prev[j]
                    inv_rho_diffused_j = 1.0 / rho_diffused_j
                difference = rho_diffused_j - rho_diffused_i  # i's; j's is -
                difference_j = -difference
                if ti.static(diffusion == "fourtakas"):
                    below = -ti.Vector([gx, gy, gz]).dot(r_ij)  # g . r_ji
                    difference -= hydrostatic_density_difference(below, rho0, b, gamma)
                    difference_j -= hydrostatic_density_difference(-below, rho0, b, gamma)
                rate += diffusion_pair_term(
                    difference, r2, inv_r2_eta2, f, inv_rho_diffused_j, mass, h, c0, delta
                )
                rate_j += diffusion_pair_term(
                    difference_j, r2, inv_r2_eta2, f, inv_rho_diffused_i, mass, h, c0, delta
                )
            # a plain read and write: chunk c's thread alone writes here
            sums[c, j] = sums[c, j] + ti.Vector([force[0], force[1], force[2], rate_j])

    @ti.func
    def fluid_particle(
        i,
        c,
        fluid,
        position: ti.template(),
        velocity: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        removed: ti.template(),
        lo,
        inv_cell,
        dims,
        cell_offsets: ti.template(),
        maxima: ti.template(),
        slot,
        region,
        density_prev: ti.template(),
        lagged,
        sums: ti.template(),
        lists: ti.template(),
    ):
        """Fluid particle i's pairs with the boundary and with the fluid above it in the sort,
        added to chunk c's sums (both particles' shares of a fluid pair): from its neighbour
        list where `lists` holds one (solver/neighbor_lists.py), else by walking the cells."""
        x_i = position[i]
        v_i = velocity[i]
        rho_i = density[i]
        rho_diffused_i = rho_i
        if ti.static(diffusion != "none"):
            if lagged:
                rho_diffused_i = density_prev[i]
        inv_rho_diffused_i = 1.0 / rho_diffused_i
        p_i = pressure[i]
        inv_rho_i = 1.0 / rho_i
        counted_i = counted_here(x_i, region)
        own = (v_i, rho_i, rho_diffused_i, inv_rho_diffused_i, p_i, inv_rho_i, counted_i)
        acc = ti.Vector([0.0, 0.0, 0.0])
        rate = 0.0
        visc = 0.0
        if ti.static(len(lists) > 0):
            counts = list_counts(lists[0], i)  # the fluid first, then the boundary
            for block in ti.static(range(BLOCKS)):
                first, end = 0, counts[0]
                if ti.static(block != FLUID_BLOCK):
                    first, end = counts[0], counts[1]
                for e in range(first, end):
                    j = list_entry(lists[0], i, e)
                    r_ij = x_i - position[j]
                    r2 = r_ij.norm_sqr()
                    if r2 < support2 and removed[j] == 0:
                        pair(
                            i, j, c, ti.static(block == FLUID_BLOCK), r_ij, r2, own, position,
                            velocity, density, pressure, region, density_prev, lagged, sums,
                            acc, rate, visc,
                        )  # fmt: skip
        else:
            box = search_cells(x_i, search_radius, lo, inv_cell, dims)
            for block in ti.static(range(BLOCKS)):  # the fluid's rows, then the boundary's
                for cz in range(box[0, 2], box[1, 2] + 1):
                    for cy in range(box[0, 1], box[1, 1] + 1):
                        cells = row_cells(x_i, search_radius, cy, cz, lo, inv_cell, dims)
                        span = block_span(cells, block, dims, cell_offsets)
                        if ti.static(block == FLUID_BLOCK):
                            span[0] = ti.max(span[0], i + 1)  # each fluid pair from its lower
                        for j in range(span[0], span[1]):
                            r_ij = x_i - position[j]
                            r2 = r_ij.norm_sqr()
                            if r2 < support2 and removed[j] == 0:
                                pair(
                                    i, j, c, ti.static(block == FLUID_BLOCK), r_ij, r2, own,
                                    position, velocity, density, pressure, region,
                                    density_prev, lagged, sums, acc, rate, visc,
                                )  # fmt: skip
        sums[c, i] = sums[c, i] + ti.Vector([acc[0], acc[1], acc[2], rate])
        merge_max(maxima, slot, ti.Vector([0.0, 0.0, visc]))

    @ti.func
    def loops(
        live,
        position: ti.template(),
        velocity: ti.template(),
        density: ti.template(),
        pressure: ti.template(),
        kind: ti.template(),
        removed: ti.template(),
        lo,
        inv_cell,
        dims,
        cell_offsets: ti.template(),
        acceleration: ti.template(),
        density_rate: ti.template(),
        maxima: ti.template(),
        slot,
        stress: ti.template(),
        region,
        density_prev: ti.template(),
        lagged,
        sums: ti.template(),
        lists: ti.template(),
    ):
        """The pass over the first `live` sorted particles: the chunks, then each fluid
        particle's sums added up in chunk order (and cleared), then under DBC the boundary
        block's gather."""
        fluid = fluid_count(live, dims, cell_offsets)
        for t in range(PAIR_CHUNKS * CHUNK_STRIDE):
            if t % CHUNK_STRIDE == 0:
                c = folded_chunk(t // CHUNK_STRIDE)
                for i in range(c * fluid // PAIR_CHUNKS, (c + 1) * fluid // PAIR_CHUNKS):
                    if removed[i] == 0:
                        fluid_particle(
                            i, c, fluid, position, velocity, density, pressure, removed, lo,
                            inv_cell, dims, cell_offsets, maxima, slot, region, density_prev,
                            lagged, sums, lists,
                        )  # fmt: skip
        for i in range(fluid):
            total = sums[0, i]
            sums[0, i] = ti.Vector.zero(float, SUM_COMPONENTS)
            for c in ti.static(range(1, PAIR_CHUNKS)):
                total += sums[c, i]
                sums[c, i] = ti.Vector.zero(float, SUM_COMPONENTS)
            acc = ti.Vector([total[0], total[1], total[2]])
            a_norm = 0.0
            v_norm = 0.0
            if removed[i] == 0:
                acc += ti.Vector([gx, gy, gz])
                a_norm = acc.norm()
                v_norm = velocity[i].norm()
            acceleration[i] = acc
            density_rate[i] = total[3]
            if counted_here(position[i], region):
                merge_max(maxima, slot, ti.Vector([a_norm, v_norm, 0.0]))
        if ti.static(boundary_rates):
            for i in range(fluid, live):
                gather_particle(
                    i, position, velocity, density, pressure, kind, removed, lo, inv_cell,
                    dims, cell_offsets, acceleration, density_rate, maxima, slot, stress,
                    region, density_prev, lagged,
                )  # fmt: skip

    return loops
