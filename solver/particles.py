"""The particle state on the device: one ndarray per quantity (structure of arrays).

Arrays in `reordered_names` follow the particles when the cell grid sorts them; the others
(accelerations, rates, dt inputs) are recomputed every step and need no reordering.
"""

import numpy as np
import taichi as ti

from solver.parallel.gather import gather
from solver.particle_kind import ParticleKind
from solver.snapshot import Snapshot


class ParticleArrays:
    """Device arrays for up to `capacity` particles in precision `dtype` (ti.f32 or ti.f64).

    `keep_position_prev` adds the position at the start of the step (symplectic scheme).
    """

    def __init__(self, capacity: int, dtype, keep_position_prev: bool = False) -> None:
        self.capacity = capacity
        self.dtype = dtype
        self.count = 0

        def vec() -> ti.Ndarray:
            return ti.Vector.ndarray(3, dtype, shape=capacity)

        def scalar(kind=dtype) -> ti.Ndarray:
            return ti.ndarray(kind, shape=capacity)

        self.reordered_names = [
            "position",
            "velocity",
            "velocity_prev",
            "density",
            "density_prev",
            "kind",
            "id",
        ]
        if keep_position_prev:
            self.reordered_names.append("position_prev")
        makers = {
            "position": vec,
            "velocity": vec,
            "velocity_prev": vec,
            "position_prev": vec,
            "density": scalar,
            "density_prev": scalar,
            "kind": lambda: scalar(ti.i32),
            "id": lambda: scalar(ti.i32),
        }
        for name in self.reordered_names:
            setattr(self, name, makers[name]())
        self._spare = {name: makers[name]() for name in self.reordered_names}

        self.pressure = scalar()
        self.acceleration = vec()
        self.density_rate = scalar()
        self.acceleration_norm = scalar()
        self.speed = scalar()
        self.viscous_rate = scalar()
        self.removed = scalar(ti.i32)

    def load(self, position: np.ndarray, kind: np.ndarray, density: np.ndarray) -> None:
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
        self.position.from_numpy(padded(position, real))
        self.velocity.from_numpy(padded(zeros3, real))
        self.velocity_prev.from_numpy(padded(zeros3, real))
        self.density.from_numpy(padded(density, real))
        self.density_prev.from_numpy(padded(density, real))
        self.kind.from_numpy(padded(kind, np.int32))
        self.id.from_numpy(padded(np.arange(n), np.int32))
        if "position_prev" in self.reordered_names:
            self.position_prev.from_numpy(padded(position, real))
        self.removed.fill(0)
        self.count = n

    def reorder(self, order: ti.Ndarray, n: int) -> None:
        """Apply the permutation `order` (new place -> old index) to the first n particles."""
        for name in self.reordered_names:
            current, spare = getattr(self, name), self._spare[name]
            gather(current, spare, order, n)
            setattr(self, name, spare)
            self._spare[name] = current
        self.count = n

    def snapshot(self, time: float, step: int) -> Snapshot:
        """Copy the live particles to the host (pressure as last computed)."""
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


def fluid_count(kind: np.ndarray) -> int:
    """Number of fluid particles in a kind array."""
    return int(np.count_nonzero(kind == ParticleKind.FLUID))
