"""Density diffusion terms (delta-SPH) added to the continuity equation of fluid particles.

Both are written, as in DualSPHysics (Dominguez et al. 2022, "DualSPHysics: from fluid dynamics
to multiphysics problems", eqs. 6-8), as

    D_i = delta h c0 sum_j psi_ij . grad_i W_ij  m_j / rho_j,
    psi_ij = 2 (rho_ji - rho_ji^H) r_ji / (r_ij^2 + eta^2),  r_ji = x_j - x_i,

with rho_ji = rho_j - rho_i. Molteni and Colagrossi (2009) take rho_ji^H = 0. Fourtakas et al.
(2019, "Local uniform stencil (LUST) boundary condition...", Comput. Fluids 190) subtract the
hydrostatic density difference rho_ji^H = rho0 ((1 + rho0 g . r_ji / B)^(1/gamma) - 1), so a
fluid at rest under gravity is left alone.
"""

from typing import Any

DIFFUSION_NAMES = ("none", "molteni", "fourtakas")


def hydrostatic_density_difference(g_dot_r_ji: Any, rho0: float, b: float, gamma: float) -> Any:
    """rho_ji^H of Fourtakas et al. (2019): the hydrostatic rho_j - rho_i for separation r_ji.

    g . r_ji is positive when j lies below i (deeper, so denser). (1 + x)^(1/gamma) - 1 is
    evaluated by its Taylor series to third order: x = rho0 g . r_ji / B is at most
    gamma 2H / (coefsound^2 h_swl), below 0.01 in practice, where the series is exact in float32
    and several times cheaper than pow in the innermost loop.
    """
    x = g_dot_r_ji * (rho0 / b)  # constants grouped, so that a kernel folds them
    k = 1.0 / gamma
    return rho0 * k * x * (1.0 + (k - 1.0) * x * (0.5 + (k - 2.0) / 6.0 * x))


def diffusion_pair_term(
    rho_difference: Any,
    r2: Any,
    inv_r2_eta2: Any,
    f: Any,
    inv_rho_j: Any,
    mass: float,
    h: float,
    c0: float,
    delta: float,
) -> Any:
    """One pair's contribution delta h c0 psi_ij . grad_i W_ij m / rho_j, given the pair's
    reciprocals `inv_r2_eta2` = 1 / (r^2 + eta^2) and `inv_rho_j` = 1 / rho_j, which the
    interaction shares between its terms (solver/physics/interaction.py).

    With grad_i W_ij = r_ij F and r_ji . r_ij = -r^2, psi_ij . grad_i W_ij is
    -2 rho_difference r^2 F / (r^2 + eta^2), positive when rho_difference > 0 (F < 0).
    """
    return delta * h * c0 * (-2.0 * rho_difference * r2 * f * inv_r2_eta2) * mass * inv_rho_j
