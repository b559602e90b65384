"""The particle state on the device: one ndarray per quantity (structure of arrays).

The state arrays (STATE) follow the particles when the cell grid sorts them, in one fused
gather launch (a kernel launch from Python costs tens of microseconds, more than the gather of
a small array). The work arrays (acceleration, rates, time-step terms, removal flags) are
recomputed every step and are never reordered.
"""

import numpy as np
import taichi as ti

from solver.parallel.gather import gather
from solver.snapshot import Snapshot

Array = ti.types.ndarray(ndim=1)

STATE = (
    "position",
    "velocity",
    "velocity_prev",
    "density",
    "density_prev",
    "pressure",
    "kind",
    "id",
)
"""The reordered arrays, in the argument order of `_reorder_state`."""


@ti.kernel
def _reorder_state(
    order: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
    position: Array,
    velocity: Array,
    velocity_prev: Array,
    density: Array,
    density_prev: Array,
    pressure: Array,
    kind: Array,
    ids: Array,
    position_out: Array,
    velocity_out: Array,
    velocity_prev_out: Array,
    density_out: Array,
    density_prev_out: Array,
    pressure_out: Array,
    kind_out: Array,
    ids_out: Array,
):
    for i in range(n):
        k = order[i]
        position_out[i] = position[k]
        velocity_out[i] = velocity[k]
        velocity_prev_out[i] = velocity_prev[k]
        density_out[i] = density[k]
        density_prev_out[i] = density_prev[k]
        pressure_out[i] = pressure[k]
        kind_out[i] = kind[k]
        ids_out[i] = ids[k]


class ParticleArrays:
    """Device arrays for up to `capacity` particles in precision `dtype` (ti.f32 or ti.f64).

    `keep_position_prev` adds the position at the start of the step (symplectic scheme).
    """

    def __init__(self, capacity: int, dtype, keep_position_prev: bool = False) -> None:
        self.capacity = capacity
        self.dtype = dtype
        self.count = 0
        self.keep_position_prev = keep_position_prev

        def vec() -> ti.Ndarray:
            return ti.Vector.ndarray(3, dtype, shape=capacity)

        def scalar(kind=dtype) -> ti.Ndarray:
            return ti.ndarray(kind, shape=capacity)

        makers = {
            "position": vec,
            "velocity": vec,
            "velocity_prev": vec,
            "density": scalar,
            "density_prev": scalar,
            "pressure": scalar,
            "kind": lambda: scalar(ti.i32),
            "id": lambda: scalar(ti.i32),
        }
        for name in STATE:
            setattr(self, name, makers[name]())
        self._spare = {name: makers[name]() for name in STATE}
        self.position_prev = vec() if keep_position_prev else None
        self._position_prev_spare = vec() if keep_position_prev else None

        self.acceleration = vec()
        self.density_rate = scalar()
        self.dt_terms = vec()
        """Per particle: |a| and |v| (fluid only) and max_j |v_ij . r_ij| / (r^2 + eta^2)."""
        self.removed = scalar(ti.i32)

    def load(
        self, position: np.ndarray, kind: np.ndarray, density: np.ndarray, pressure: np.ndarray
    ) -> None:
        """Fill the state from host arrays: particles at rest, ids 0..n-1 in the given order."""
        n = len(kind)
        if n > self.capacity:
            raise ValueError(f"{n} particles exceed capacity {self.capacity}")
        real = np.float64 if self.dtype == ti.f64 else np.float32

        def padded(values: np.ndarray, dtype) -> np.ndarray:
            full = np.zeros((self.capacity,) + values.shape[1:], dtype=dtype)
            full[:n] = values
            return full

        zeros3 = np.zeros((n, 3))
        initial = {
            "position": (position, real),
            "velocity": (zeros3, real),
            "velocity_prev": (zeros3, real),
            "density": (density, real),
            "density_prev": (density, real),
            "pressure": (pressure, real),
            "kind": (kind, np.int32),
            "id": (np.arange(n), np.int32),
        }
        for name in STATE:
            values, dtype = initial[name]
            getattr(self, name).from_numpy(padded(values, dtype))
        if self.position_prev is not None:
            self.position_prev.from_numpy(padded(position, real))
        self.removed.fill(0)
        self.count = n

    def reorder(self, order: ti.Ndarray, n: int) -> None:
        """Apply the permutation `order` (new place -> old index) to the first n particles."""
        current = [getattr(self, name) for name in STATE]
        spare = [self._spare[name] for name in STATE]
        _reorder_state(order, n, *current, *spare)
        for name, now, before in zip(STATE, spare, current, strict=True):
            setattr(self, name, now)
            self._spare[name] = before
        if self.position_prev is not None:
            gather(self.position_prev, self._position_prev_spare, order, n)
            self.position_prev, self._position_prev_spare = (
                self._position_prev_spare,
                self.position_prev,
            )
        self.count = n

    def snapshot(self, time: float, step: int) -> Snapshot:
        """Copy the live particles to the host."""
        n = self.count
        return Snapshot(
            time=time,
            step=step,
            position=self.position.to_numpy()[:n],
            velocity=self.velocity.to_numpy()[:n],
            density=self.density.to_numpy()[:n],
            pressure=self.pressure.to_numpy()[:n],
            kind=self.kind.to_numpy()[:n],
            id=self.id.to_numpy()[:n],
        )
