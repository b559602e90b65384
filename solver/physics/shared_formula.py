"""Use one plain-Python formula both on numpy arrays and inside Taichi kernels.

The physics formulas (kernels, equation of state, viscosity, diffusion) are written once as
arithmetic on their arguments. `taichi_func` turns such a function into a Taichi function
without touching the original, which numpy code keeps calling.
"""

import types
from collections.abc import Callable

import taichi as ti


def taichi_func(formula: Callable) -> Callable:
    """A ti.func running `formula`'s code; its type hints (not Taichi types) are dropped."""
    clone = types.FunctionType(
        formula.__code__,
        formula.__globals__,
        formula.__name__,
        formula.__defaults__,
        formula.__closure__,
    )
    clone.__doc__ = formula.__doc__
    return ti.func(clone)
