"""The slab of space in which a process counts particles toward the step's global figures.

Under domain decomposition (solver/distributed/) every process holds the particles of its slab
along x and, around them, copies of its neighbours' particles (ghosts). Values are exact for
every particle near the slab, but a ghost far out in the halo misses some of its neighbours, so
its acceleration is wrong; the time-step maxima and the count of particles flagged for removal
must therefore come from particles the process computes exactly, each counted by one process
only. The slabs' planes partition x: a process counts a particle whose current x lies in
[lo, hi) of its slab. A single process counts everywhere (EVERYWHERE).

A NaN position is counted everywhere (both comparisons are false), so no process misses it.
"""

import taichi as ti

BIG = 3.0e38
"""Beyond any coordinate (finite, so that every backend, Metal included, takes the constant)."""

EVERYWHERE = (-BIG, BIG)
"""The counting region of a process that holds every particle."""


@ti.func
def everywhere():
    """EVERYWHERE as a Taichi vector, for kernels of a process that holds every particle."""
    return ti.Vector([-BIG, BIG])


@ti.func
def counted_here(x, region) -> bool:
    """Whether the particle at x is counted by the process whose slab is [region[0],
    region[1]) along x."""
    return not (x[0] < region[0] or x[0] >= region[1])
