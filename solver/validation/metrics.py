"""Macroscopic quantities of the fluid in one snapshot: what two runs, or a run and an
experiment, are compared on.

Every fluid particle carries the same mass m (`Config.particle_mass`: rho0 dp^3, or rho0 times
the fitted cell under `particles.fluid_lattice = "fitted"`), so masses
and energies are sums over the FLUID particles present in the snapshot (removed particles are
absent and no longer count). Sums are taken in float64 whatever the run's precision.

- kinetic energy  E_k = sum 1/2 m |v|^2
- potential energy E_p = sum -m g . (x - x_ref), x_ref the tank's lower corner: with gravity
  along -z this is sum m |g| (z - z_floor), zero for water lying on the tank floor
- centre of mass of the fluid (mean position)
- front: the `percentile` (99.5 by default) of x among the fluid particles less than
  `band_dp` dp (2 by default, see DEFAULT_FRONT_BAND_DP) above the tank floor, which ignores
  isolated droplets ahead of the surge (cases.md, section 3)
- height at the back wall, for the collapse of a column (`back_wall_height`)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from solver.config import Config
from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot

__all__ = [
    "DBC_FRONT_BAND_DP",
    "DEFAULT_FRONT_BAND_DP",
    "DEFAULT_FRONT_PERCENTILE",
    "FluidMetrics",
    "back_wall_height",
    "compute_metrics",
    "fluid_mask",
    "front_position",
    "kinetic_energy",
    "potential_energy",
]

#: Percentile of x among near-floor fluid particles taken as the front (cases.md, section 3).
DEFAULT_FRONT_PERCENTILE = 99.5
#: Height of the near-floor band, in dp, in which the front is looked for: the two lowest
#: particle layers of water resting on the floor (under mDBC at dp/2 and 3 dp/2). Under DBC
#: (Crespo et al. 2007) moving water rides 2 to 2.7 dp above the wall's particle layer while
#: the layer placed at 1 dp stays pinned where the column stood, so a DBC run needs
#: `--front-band-dp 3` (DBC_FRONT_BAND_DP) to follow the surge rather than that pinned layer.
DEFAULT_FRONT_BAND_DP = 2.0
#: The near-floor band, in dp, that follows the surge of a DBC run (see above).
DBC_FRONT_BAND_DP = 3.0


@dataclass(frozen=True)
class FluidMetrics:
    """Macroscopic quantities of the fluid at one time (SI units; front in metres)."""

    time: float
    fluid_count: int
    mass: float
    kinetic_energy: float
    potential_energy: float
    centre_of_mass: tuple[float, float, float]
    front: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (NaN, for an undefined front, becomes None)."""
        data = asdict(self)
        data["centre_of_mass"] = list(self.centre_of_mass)
        if not math.isfinite(self.front):
            data["front"] = None
        return data


def fluid_mask(snap: Snapshot) -> np.ndarray:
    """Boolean mask of the FLUID particles of `snap`."""
    return np.asarray(snap.kind) == int(ParticleKind.FLUID)


def kinetic_energy(velocity: np.ndarray, particle_mass: float) -> float:
    """sum 1/2 m |v|^2 over the rows of `velocity` (n, 3) [J], accumulated in float64."""
    v = np.asarray(velocity, dtype=np.float64)
    return float(0.5 * particle_mass * np.sum(v * v))


def potential_energy(
    position: np.ndarray,
    particle_mass: float,
    gravity: tuple[float, float, float],
    reference: tuple[float, float, float],
) -> float:
    """sum -m g . (x - reference) over the rows of `position` (n, 3) [J].

    With gravity (0, 0, -g) and `reference` on the tank floor this is sum m g (z - z_floor).
    """
    x = np.asarray(position, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    g = np.asarray(gravity, dtype=np.float64)
    return float(-particle_mass * np.sum(x @ g))


def front_position(
    position: np.ndarray,
    floor_z: float,
    dp: float,
    *,
    percentile: float = DEFAULT_FRONT_PERCENTILE,
    band_dp: float = DEFAULT_FRONT_BAND_DP,
) -> float:
    """The surge front: the `percentile` of x among rows of `position` with z < floor + band.

    `position` holds fluid particles only. The band is `band_dp` * `dp` high. Returns NaN when
    no particle lies in the band (no water on the floor).
    """
    p = np.asarray(position, dtype=np.float64)
    near_floor = p[:, 2] < floor_z + band_dp * dp
    if not np.any(near_floor):
        return math.nan
    return float(np.percentile(p[near_floor, 0], percentile))


def back_wall_height(
    position: np.ndarray,
    back_x: float,
    floor_z: float,
    dp: float,
    *,
    band_dp: float = 2.0,
    gap_dp: float = 2.0,
) -> float:
    """Height of the water column standing at the back wall x = `back_x` [m above the floor].

    Estimator (robust to drops): take the fluid particles (rows of `position`) with
    x < back_x + band_dp dp, sort their z, and climb from the lowest one while consecutive
    particles are at most gap_dp dp apart; the height is the z of the last particle reached,
    minus the floor. Splashes above the column, separated from it by a gap, do not count. With
    the scene's lattice (fluid particles at z = floor + dp, ..., top of the block) this is
    exactly the block's height at t = 0. Returns 0.0 when the band holds no particle or its
    lowest particle is more than gap_dp dp above the floor (the column has left the wall).
    """
    p = np.asarray(position, dtype=np.float64)
    z = np.sort(p[p[:, 0] < back_x + band_dp * dp, 2])
    gap = gap_dp * dp
    if z.size == 0 or z[0] - floor_z > gap:
        return 0.0
    breaks = np.flatnonzero(np.diff(z) > gap)
    top = z[breaks[0]] if breaks.size else z[-1]
    return float(top - floor_z)


def compute_metrics(
    snap: Snapshot,
    config: Config,
    *,
    front_percentile: float = DEFAULT_FRONT_PERCENTILE,
    front_band_dp: float = DEFAULT_FRONT_BAND_DP,
) -> FluidMetrics:
    """The macroscopic quantities of the fluid in `snap`, for the case `config`."""
    fluid = fluid_mask(snap)
    position = np.asarray(snap.position, dtype=np.float64)[fluid]
    velocity = np.asarray(snap.velocity, dtype=np.float64)[fluid]
    m = config.particle_mass
    tank_min = config.tank.box.min
    count = int(position.shape[0])
    if count:
        com = tuple(float(c) for c in position.mean(axis=0))
    else:
        com = (math.nan, math.nan, math.nan)
    return FluidMetrics(
        time=float(snap.time),
        fluid_count=count,
        mass=count * m,
        kinetic_energy=kinetic_energy(velocity, m),
        potential_energy=potential_energy(position, m, config.physics.gravity, tank_min),
        centre_of_mass=(com[0], com[1], com[2]),
        front=front_position(
            position,
            tank_min[2],
            config.dp,
            percentile=front_percentile,
            band_dp=front_band_dp,
        ),
    )
