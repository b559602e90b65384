"""The last good state of a run, kept on the simulation's device where it fits.

A run keeps the state of its latest output time, so that a numerical failure leaves that state
in checkpoint.npz. Copying it to the host at every output time cost the GPUs more than the
output itself (docs/performance.md, "What an output time costs": 22 ms an output time for
SPHERIC test 2 on the H200, the device idle meanwhile): the copy goes device to device
instead (0.8 ms for the same state, synchronised) and comes to the host only when a failure
needs it.
"""

from __future__ import annotations

import numpy as np
import taichi as ti


def _like(array: ti.Ndarray) -> ti.Ndarray:
    """A new device array of `array`'s shape and element type."""
    if array.element_shape:
        return ti.Vector.ndarray(array.element_shape[0], array.dtype, shape=array.shape)
    return ti.ndarray(array.dtype, shape=array.shape)


class KeptState:
    """Copies of named device arrays and the host scalars that go with them, taken together:
    on the device (`on_device`, the default), or on the host where the device has no room for
    them (solver/memory.py `check_memory`).

    Device copies are allocated at the first `keep`, so a simulation that never keeps (a
    benchmark, a test stepping by hand) spends no memory on them.
    """

    def __init__(self, on_device: bool = True) -> None:
        self.on_device = on_device
        self._arrays: dict[str, ti.Ndarray] = {}
        self._host: dict[str, np.ndarray] = {}
        self._scalars: dict[str, np.ndarray] = {}

    def keep(self, arrays: dict[str, ti.Ndarray], scalars: dict[str, np.ndarray]) -> None:
        """Copy `arrays` (on their device, or to the host) and hold `scalars` (host values,
        not copied: they must not be changed in place afterwards), replacing what was kept."""
        if not self.on_device:
            self._host = {name: array.to_numpy() for name, array in arrays.items()}
        else:
            if set(arrays) != set(self._arrays):
                self._arrays = {name: _like(array) for name, array in arrays.items()}
            for name, array in arrays.items():
                self._arrays[name].copy_from(array)
        self._scalars = dict(scalars)

    def to_host(self) -> dict[str, np.ndarray]:
        """The kept arrays on the host, with the kept scalars."""
        if not self._scalars:
            raise RuntimeError("nothing has been kept")
        if not self.on_device:
            return self._host | self._scalars
        return {name: array.to_numpy() for name, array in self._arrays.items()} | self._scalars
