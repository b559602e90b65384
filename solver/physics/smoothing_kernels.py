"""Smoothing kernels W(r, h) in 3D and their gradient factor F(r, h).

Every formula here is plain arithmetic on its arguments (a comparison as a 0/1 factor stands
for a branch), so one definition serves both numpy (probes, tests) and Taichi kernels, through
`solver.physics.shared_formula.taichi_func`. The
support radius is 2h for both kernels. The gradient is written as grad_i W_ij = r_ij F(r, h)
with r_ij = x_i - x_j, F = (1/r) dW/dr, which stays finite as r -> 0. q = r / h is written
r * (1 / h): in a kernel h is a constant, so 1 / h is folded when compiled and the pair loop
multiplies, where a `/` would stay a division (solver/physics/interaction.py says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

KERNEL_NAMES = ("cubic_spline", "wendland_c2")


def cubic_spline_w(r: Any, h: Any) -> Any:
    """Cubic B-spline, Monaghan and Lattanzio (1985), 3D normalisation 1/(pi h^3).

    W = sigma/4 [(2-q)+^3 - 4 (1-q)+^3], q = r/h.
    """
    q = r * (1.0 / h)
    sigma = 1.0 / (math.pi * h * h * h)
    far = (2.0 - q) * (q < 2.0)
    near = (1.0 - q) * (q < 1.0)
    return sigma * 0.25 * (far**3 - 4.0 * near**3)


def cubic_spline_f(r: Any, h: Any) -> Any:
    """(1/r) dW/dr of the cubic spline: sigma/h^2 * (1/q) dw/dq, finite at q = 0."""
    q = r * (1.0 / h)
    sigma = 1.0 / (math.pi * h * h * h)
    inner = (q < 1.0) * (2.25 * q - 3.0)
    outer = 0.75 * (2.0 - q) ** 2 * (q >= 1.0) * (q < 2.0) / (q + (q < 1.0))
    return sigma / (h * h) * (inner - outer)


def wendland_c2_w(r: Any, h: Any) -> Any:
    """Wendland C2 kernel (Wendland 1995) as in DualSPHysics (Dominguez et al. 2022).

    W = 21/(16 pi h^3) (1 - q/2)+^4 (2q + 1), q = r/h.
    """
    q = r * (1.0 / h)
    alpha = 21.0 / (16.0 * math.pi * h * h * h)
    u = (1.0 - 0.5 * q) * (q < 2.0)
    return alpha * u**4 * (2.0 * q + 1.0)


def wendland_c2_f(r: Any, h: Any) -> Any:
    """(1/r) dW/dr of the Wendland C2 kernel: -5 alpha/h^2 (1 - q/2)+^3."""
    q = r * (1.0 / h)
    alpha = 21.0 / (16.0 * math.pi * h * h * h)
    u = (1.0 - 0.5 * q) * (q < 2.0)
    return -5.0 * alpha / (h * h) * u**3


KernelPair = tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]


def kernel_functions(name: str) -> KernelPair:
    """The (W, F) pair of the kernel called `name` (one of KERNEL_NAMES)."""
    pairs: dict[str, KernelPair] = {
        "cubic_spline": (cubic_spline_w, cubic_spline_f),
        "wendland_c2": (wendland_c2_w, wendland_c2_f),
    }
    if name not in pairs:
        raise ValueError(f"unknown smoothing kernel {name!r}; allowed: {', '.join(KERNEL_NAMES)}")
    return pairs[name]
