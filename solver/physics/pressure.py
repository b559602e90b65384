"""Pressure of every particle from its density through the Tait equation (see eos.py)."""

import taichi as ti

from solver.config import Config
from solver.physics import eos
from solver.physics.shared_formula import taichi_func

tait_pressure = taichi_func(eos.tait_pressure)


def build_pressure(cfg: Config):
    """A kernel writing pressure[i] = p(density[i]) for i < n, constants compiled in."""
    rho0, b, gamma = cfg.physics.rho0, cfg.eos_b, cfg.physics.gamma

    @ti.kernel
    def compute_pressure(
        density: ti.types.ndarray(ndim=1), pressure: ti.types.ndarray(ndim=1), n: ti.i32
    ):
        for i in range(n):
            pressure[i] = tait_pressure(density[i], rho0, b, gamma)

    return compute_pressure
