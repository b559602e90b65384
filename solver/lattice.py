"""The particle lattice along one axis, as counts and index ranges (no arrays of particles).

Both the scene (which places the particles) and the config checks and memory estimate (which
only need how many there will be) use these, so a count never disagrees with what is built.
Every rule compares with the same floating-point expressions as the placement, so a point that
sits on a face within the tolerance is counted exactly when it is placed.
"""

from __future__ import annotations

import math

__all__ = ["face_lattice_size", "fluid_index_range"]


def face_lattice_size(lo: float, hi: float, dp: float, tol: float = 0.0) -> int:
    """Points of the face lattice lo, lo + dp, ... (<= hi - dp/2 within tol), then hi."""
    n = max(math.floor((hi - lo - 0.5 * dp + tol) / dp), 0)
    inner = n + 1 if lo + dp * n <= hi - 0.5 * dp + tol else n
    return inner + 1


def fluid_index_range(
    tank_lo: float, tank_hi: float, lo: float, hi: float, dp: float, tol: float = 0.0
) -> range:
    """The i whose point tank_lo + i dp lies in (lo, hi] and dp/2 inside the tank faces.

    All comparisons take the tolerance `tol` in the point's favour. The range is empty when a
    block is too thin (or too close to a wall) to hold a point of the lattice.
    """

    def above_low(i: int) -> bool:
        x = tank_lo + dp * i
        return x > lo + tol and x >= tank_lo + 0.5 * dp - tol

    def below_high(i: int) -> bool:
        x = tank_lo + dp * i
        return x <= hi + tol and x <= tank_hi - 0.5 * dp + tol

    # Start from the rounded guesses and step to the exact ends (one or two steps at most).
    first = math.floor((max(lo, tank_lo) - tank_lo) / dp)
    while not above_low(first):
        first += 1
    while above_low(first - 1):
        first -= 1
    last = math.floor((min(hi, tank_hi) - tank_lo) / dp)
    while not below_high(last):
        last -= 1
    while below_high(last + 1):
        last += 1
    return range(first, last + 1)
