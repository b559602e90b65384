"""The particle lattice along one axis, as counts and index ranges (no arrays of particles).

Both the scene (which places the particles) and the config checks and memory estimate (which
only need how many there will be) use these, so a count never disagrees with what is built.
Every rule compares with the same floating-point expressions as the placement, so a point that
sits on a face within the tolerance is counted exactly when it is placed.

Where the lattice sits depends on the boundary method, through one number, `surface_gap`: the
distance (in dp) from the innermost boundary particle layer to the solid surface it stands for.
Dynamic boundary particles (DBC; Crespo et al. 2007, Comput. Mater. Contin. 5) put that layer on
the surface (gap 0). The modified dynamic boundary condition (mDBC; English et al. 2022,
"Modified dynamic boundary conditions (mDBC) for general-purpose SPH", Comput. Part. Mech. 9,
1-15) puts the surface dp/2 beyond it (gap 1/2), so that a boundary particle and its
fluid neighbour sit dp/2 on either side of the surface. Fluid particles then fill cell centres
tank.min + (i + 1/2) dp, and placing the particles "by construction" makes the surface coincide
with the geometry the config gives.

That lattice builds a block whose size is not a whole number of dp up to dp/2 longer or shorter
(SPHERIC test 2's 0.55 m reservoir is 27.5 dp deep at dp = 0.02 and is built 0.56 m deep). The
fitted lattice (`particles.fluid_lattice = "fitted"`, `fitted_axis`) fills the block itself
(cut, under DBC, to dp/2 from the wall layers): n = round(L / dp) layers of spacing L / n per
axis, so the water has exactly the block's size, and the fluid particle mass is rho0 times the
fitted cell, so it has exactly the block's mass.
"""

from __future__ import annotations

import math

__all__ = [
    "even_boundary_lattice",
    "face_lattice_size",
    "fitted_axis",
    "fluid_index_range",
    "surface_gap",
]


def surface_gap(boundary: str) -> float:
    """Distance, in dp, from the innermost boundary layer to the surface: 1/2 (mdbc), 0 (dbc)."""
    return {"mdbc": 0.5, "dbc": 0.0}[boundary]


def even_boundary_lattice(boundary: str) -> bool:
    """Whether the boundary particles of `boundary` (tank walls and box obstacles) divide each
    face evenly (see `face_lattice` in solver/scene.py): under mDBC. DBC keeps the classic
    lattice, OpenFPM's, so that the seed case's DBC variant is particle for particle OpenFPM's
    case."""
    return boundary == "mdbc"


def face_lattice_size(lo: float, hi: float, dp: float, tol: float = 0.0) -> int:
    """Points of the face lattice lo, lo + dp, ... (<= hi - dp/2 within tol), then hi."""
    n = max(math.floor((hi - lo - 0.5 * dp + tol) / dp), 0)
    inner = n + 1 if lo + dp * n <= hi - 0.5 * dp + tol else n
    return inner + 1


def fluid_index_range(
    tank_lo: float,
    tank_hi: float,
    lo: float,
    hi: float,
    dp: float,
    tol: float = 0.0,
    gap: float = 0.0,
) -> range:
    """The i whose point tank_lo + (i + gap) dp lies in (lo, hi] and dp/2 inside the tank faces.

    `gap` is `surface_gap` of the boundary method. All comparisons take the tolerance `tol` in
    the point's favour. The range is empty when a block is too thin (or too close to a wall) to
    hold a point of the lattice.
    """

    def above_low(i: int) -> bool:
        x = tank_lo + dp * (i + gap)
        return x > lo + tol and x >= tank_lo + 0.5 * dp - tol

    def below_high(i: int) -> bool:
        x = tank_lo + dp * (i + gap)
        return x <= hi + tol and x <= tank_hi - 0.5 * dp + tol

    # Start from the rounded guesses and step to the exact ends (one or two steps at most).
    first = math.floor((max(lo, tank_lo) - tank_lo) / dp - gap)
    while not above_low(first):
        first += 1
    while above_low(first - 1):
        first -= 1
    last = math.floor((min(hi, tank_hi) - tank_lo) / dp - gap)
    while not below_high(last):
        last -= 1
    while below_high(last + 1):
        last += 1
    return range(first, last + 1)


def fitted_axis(
    tank_lo: float,
    tank_hi: float,
    lo: float,
    hi: float,
    dp: float,
    tol: float = 0.0,
    gap: float = 0.0,
) -> tuple[float, float, int]:
    """The fitted lattice of a block [lo, hi] along one axis: (first point, spacing, count).

    The block is first cut to the water's reach in the tank, [tank_lo + r, tank_hi - r] with
    r = (1/2 - gap) dp (`gap` is `surface_gap` of the boundary method: the water reaches the
    tank faces under mDBC, keeps dp/2 from the wall layer under DBC). count = round(L / dp)
    (halves up) layers of spacing L / count then fill the cut block's length L exactly, their
    points at its low end + (i + 1/2) spacing; count is 0 when L is below dp/2 (within tol).
    """
    reach = (0.5 - gap) * dp
    low, high = max(lo, tank_lo + reach), min(hi, tank_hi - reach)
    length = high - low
    count = max(math.floor(length / dp + 0.5 + tol / dp), 0)
    spacing = length / count if count else dp
    return low + 0.5 * spacing, spacing, count
