"""Tait equation of state for weakly compressible SPH (Monaghan 1994, "Simulating free surface
flows with SPH"; Batchelor 1967): p = B ((rho / rho0)^gamma - 1), B = c0^2 rho0 / gamma.

Plain arithmetic, so the same functions serve numpy (initial conditions, tests) and Taichi.
"""

from typing import Any


def tait_pressure(rho: Any, rho0: float, b: float, gamma: float) -> Any:
    """Pressure of density rho."""
    return b * ((rho / rho0) ** gamma - 1.0)


def tait_density(pressure: Any, rho0: float, b: float, gamma: float) -> Any:
    """Density at which the Tait equation gives `pressure` (its inverse)."""
    return rho0 * (pressure / b + 1.0) ** (1.0 / gamma)
