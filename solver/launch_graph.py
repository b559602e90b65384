"""Kernels launched through Taichi's compute graph, which sets their arguments in C++.

A plain call of a Taichi kernel checks and converts each argument in Python on every call
(`Kernel.launch_kernel` in Taichi 1.7.4); the fused step takes 30 of them, and on GPUs the
host's preparation of each launch comes close to bounding small cases (docs/performance.md,
"Known headroom"). A compute graph (`ti.graph`, made for Taichi's AOT modules; `jit_run` runs
one in-process) records a dispatch of the kernel with symbolic arguments once; each run passes
the values by name, and the runtime sets them in C++, then compiles (a cache lookup after the
first time) and launches the kernel as a plain call does. The kernel, its compiled code and the
order of launches do not change, so neither do the results, bit for bit. On the 2-core CPU a
launch of the seed case's fused step with no particles took 170 to 215 microseconds through the
graph against 262 to 312 as a plain call (`scripts/launch_cost.py`; docs/performance.md, "The
fused step launched through a compute graph").
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import taichi as ti
from taichi.graph import Arg, ArgKind, GraphBuilder
from taichi.lang import impl
from taichi.lang.matrix import MatrixType
from taichi.types.primitive_types import integer_types


def _symbolic(name: str, annotation: Any, value: Any) -> Any:
    """The graph argument standing for `value`, the kernel argument `name` annotated
    `annotation`: an ndarray of its element type and dimensions, a vector or matrix of the
    annotation's type, or a scalar of the annotation's type (`float` and `int` are Taichi's
    defaults)."""
    if isinstance(value, ti.Ndarray):
        element = tuple(getattr(value, "element_shape", ()))
        dtype = value.dtype
        if len(element) == 1:
            dtype = ti.types.vector(element[0], dtype)
        elif len(element) == 2:
            dtype = ti.types.matrix(element[0], element[1], dtype)
        return Arg(ArgKind.NDARRAY, name, dtype=dtype, ndim=len(value.shape))
    if isinstance(annotation, MatrixType):
        return Arg(ArgKind.MATRIX, name, dtype=annotation)
    if annotation is float:
        annotation = impl.get_runtime().default_fp
    elif annotation is int:
        annotation = impl.get_runtime().default_ip
    return Arg(ArgKind.SCALAR, name, dtype=annotation)


def _converter(annotation: Any, value: Any) -> Callable[[Any], Any]:
    """How a value of the kernel argument annotated `annotation` (`value` an example) goes
    to the graph's run: the C++ array of an ndarray, a flat list of a vector's or matrix's
    entries, a Python int or float of a scalar."""
    if isinstance(value, ti.Ndarray):
        return lambda array: array.arr
    if isinstance(annotation, MatrixType):
        cast = int if annotation.dtype in integer_types else float

        def entries(matrix: Any) -> list:
            if isinstance(matrix, ti.Matrix):
                matrix = matrix.to_numpy()
            return [cast(x) for x in np.asarray(matrix).ravel()]

        return entries
    if annotation in integer_types:
        return int
    return float


class GraphLaunch:
    """`kernel` (a `@ti.kernel` whose arguments are ndarrays, vectors, matrices and scalars)
    launched through a compute graph of one dispatch, built at the first call from that call's
    arguments, whose array types and dimensions every later call keeps. Calls take the
    kernel's positional arguments. A graph returns nothing, so a kernel with a return value is
    refused: it must be called plainly."""

    def __init__(self, kernel: Callable) -> None:
        if kernel._primal.return_type is not None:
            raise TypeError(f"{kernel.__name__} returns a value: call it plainly, not in a graph")
        self.kernel = kernel
        self._names = [argument.name for argument in kernel._primal.arguments]
        self._graph = None
        self._converters: list[Callable[[Any], Any]] = []

    def _build(self, args: tuple) -> None:
        """Record the dispatch, its arguments' kinds and types taken from `args`."""
        annotations = [argument.annotation for argument in self.kernel._primal.arguments]
        arguments = list(zip(self._names, annotations, args, strict=True))
        symbols = [_symbolic(name, annotation, value) for name, annotation, value in arguments]
        self._converters = [_converter(annotation, value) for _, annotation, value in arguments]
        builder = GraphBuilder()
        builder.dispatch(self.kernel, *symbols)
        self._graph = builder.compile()._compiled_graph

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self._names):
            name, count = self.kernel.__name__, len(self._names)
            raise TypeError(f"{name} takes {count} arguments, got {len(args)}")
        if self._graph is None:
            self._build(args)
        values = {
            n: convert(v) for n, convert, v in zip(self._names, self._converters, args, strict=True)
        }
        self._graph.jit_run(impl.get_runtime().prog.config(), values)
