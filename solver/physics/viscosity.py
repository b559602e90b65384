"""Monaghan's artificial viscosity (Monaghan 1992, "Smoothed particle hydrodynamics", ARA&A 30,
eq. 4.1; the form used by DualSPHysics, Crespo et al. 2015, eq. 7):

    Pi_ij = -alpha c0 mu_ij / rho_ij  if v_ij . r_ij < 0, else 0,
    mu_ij = h v_ij . r_ij / (r_ij^2 + eta^2),   rho_ij = (rho_i + rho_j) / 2,

added to the momentum equation as -sum_j m_j Pi_ij grad_i W_ij.
"""

from typing import Any


def monaghan_pi(
    v_dot_r: Any, r2: Any, rho_mean: Any, h: float, eta2: float, alpha: float, c0: float
) -> Any:
    """Pi_ij for one pair, zero for separating particles (arithmetic only)."""
    mu = h * v_dot_r / (r2 + eta2)
    return -alpha * c0 * mu / rho_mean * (v_dot_r < 0.0)
