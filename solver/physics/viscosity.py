"""The viscous terms of the momentum equation, one pair at a time; `physics.viscosity` picks one.

Monaghan's artificial viscosity (Monaghan 1992, "Smoothed particle hydrodynamics", ARA&A 30,
eq. 4.1; the form used by DualSPHysics, Crespo et al. 2015, CPC 187, eq. 7):

    Pi_ij = -alpha c0 mu_ij / rho_ij  if v_ij . r_ij < 0, else 0,
    mu_ij = h v_ij . r_ij / (r_ij^2 + eta^2),   rho_ij = (rho_i + rho_j) / 2,

added to the momentum equation as -sum_j m_j Pi_ij grad_i W_ij.

Laminar viscosity (Lo and Shao 2002, "Simulation of near-shore solitary wave mechanics by an
incompressible SPH method", Applied Ocean Research 24, 275-286; Crespo et al. 2015, eq. 8):

    dv_i/dt += sum_j m_j 4 nu (r_ij . grad_i W_ij) / ((rho_i + rho_j)(r_ij^2 + eta^2)) v_ij,

with nu the kinematic viscosity; it comes with the SPS turbulence closure (sps.py) in place of
Pi_ij, as in DualSPHysics.

The time step keeps its rule under either term (integrate.cfl_time_step; DualSPHysics does the
same): the viscous diffusion limit dt <= 0.125 h^2 / nu (Morris et al. 1997, J. Comput. Phys.
136) is 27 s for water (nu = 1e-6 m^2/s) at the seed case's h = 14.7 mm, and still 0.03 s with
an eddy viscosity nu_t = (0.12 dp)^2 |S| at a violent |S| = 1000 1/s, against CFL steps of
about 1e-4 s.
"""

from typing import Any


def monaghan_pi(
    v_dot_r: Any, inv_r2_eta2: Any, rho_mean: Any, h: float, alpha: float, c0: float
) -> Any:
    """Pi_ij for one pair, zero for separating particles (arithmetic only); `inv_r2_eta2` is
    1 / (r_ij^2 + eta^2), which the pair's other terms share (one division a pair)."""
    mu = h * v_dot_r * inv_r2_eta2
    return -alpha * c0 * mu / rho_mean * (v_dot_r < 0.0)


def laminar_factor(
    r_dot_grad: Any, r2: Any, rho_sum: Any, mass: float, nu: float, eta2: float
) -> Any:
    """m_j 4 nu (r_ij . grad_i W_ij) / ((rho_i + rho_j)(r_ij^2 + eta^2)): times v_ij, the
    laminar acceleration of particle i by j (arithmetic only; symmetric in i and j, so the
    pair's forces are opposite)."""
    return mass * 4.0 * nu * r_dot_grad / (rho_sum * (r2 + eta2))
