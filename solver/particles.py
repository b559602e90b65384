"""The particle state on the device: one ndarray per quantity (structure of arrays).

The state arrays (STATE) follow the particles when the cell grid sorts them, in one fused
gather launch (a kernel launch from Python costs tens of microseconds, more than the gather of
a small array). The work arrays (acceleration, rates, time-step terms, removal flags) are
recomputed every step and are never reordered.
"""

from dataclasses import dataclass

import numpy as np
import taichi as ti

from solver.parallel.gather import gather
from solver.physics.sps import STRESS_COMPONENTS
from solver.snapshot import Snapshot

Array = ti.types.ndarray(ndim=1)

INT_BYTES = 4
"""Bytes of an i32 element (kinds, ids, flags)."""


@dataclass(frozen=True)
class ArraySpec:
    """One per-particle array: its components, element type and copies."""

    components: int
    """1 for a scalar, 3 for a vector."""
    real: bool
    """In the run's precision (f32 or f64); otherwise i32."""
    spare: bool = False
    """Has a second copy that a reorder swaps in."""
    symplectic_only: bool = False
    """Allocated only for the symplectic scheme."""
    sps_only: bool = False
    """Allocated only for the SPS turbulence closure (physics.viscosity = "laminar_sps")."""

    def nbytes(self, real_bytes: int, spare: bool = True) -> int:
        """Bytes per particle of this array, with its spare unless `spare` is False."""
        element = self.components * (real_bytes if self.real else INT_BYTES)
        return element * (2 if self.spare and spare else 1)


LAYOUT: dict[str, ArraySpec] = {
    "position": ArraySpec(3, True, spare=True),
    "velocity": ArraySpec(3, True, spare=True),
    "velocity_prev": ArraySpec(3, True, spare=True),
    "density": ArraySpec(1, True, spare=True),
    "density_prev": ArraySpec(1, True, spare=True),
    "pressure": ArraySpec(1, True, spare=True),
    "kind": ArraySpec(1, False, spare=True),
    "id": ArraySpec(1, False, spare=True),
    "ghost": ArraySpec(3, True, spare=True),
    "position_prev": ArraySpec(3, True, spare=True, symplectic_only=True),
    "tau": ArraySpec(STRESS_COMPONENTS, True, spare=True, sps_only=True),
    "acceleration": ArraySpec(3, True),
    "density_rate": ArraySpec(1, True),
    "removed": ArraySpec(1, False),
}
"""Every array of ParticleArrays: what `__init__` allocates and the memory estimate counts.

removed is the removal flag (0 kept, else the reason); ghost is the vector from a boundary
particle to its ghost node (mDBC; zero for fluid particles and under DBC); tau is the SPS
stress tau / rho^2 (solver/physics/sps.py; zero for boundary particles), whose spare
`tau_next` the interaction writes, then `swap_stress` makes it current.
"""

STATE = tuple(
    name
    for name, spec in LAYOUT.items()
    if spec.spare and not spec.symplectic_only and not spec.sps_only
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
    ghost: Array,
    position_out: Array,
    velocity_out: Array,
    velocity_prev_out: Array,
    density_out: Array,
    density_prev_out: Array,
    pressure_out: Array,
    kind_out: Array,
    ids_out: Array,
    ghost_out: Array,
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
        ghost_out[i] = ghost[k]


class ParticleArrays:
    """Device arrays for up to `capacity` particles in precision `dtype` (ti.f32 or ti.f64).

    `keep_position_prev` adds the position at the start of the step (symplectic scheme),
    `keep_sps_stress` the SPS stress and its spare (tau, tau_next).
    """

    def __init__(
        self,
        capacity: int,
        dtype,
        keep_position_prev: bool = False,
        keep_sps_stress: bool = False,
    ) -> None:
        self.capacity = capacity
        self.dtype = dtype
        self.count = 0
        self.keep_position_prev = keep_position_prev

        def make(name: str) -> ti.Ndarray | None:
            spec = LAYOUT[name]
            if spec.symplectic_only and not keep_position_prev:
                return None
            if spec.sps_only and not keep_sps_stress:
                return None
            kind = dtype if spec.real else ti.i32
            if spec.components == 1:
                return ti.ndarray(kind, shape=capacity)
            return ti.Vector.ndarray(spec.components, kind, shape=capacity)

        for name in LAYOUT:
            setattr(self, name, make(name))
        self._spare = {name: make(name) for name in STATE}
        self._position_prev_spare = make("position_prev")
        self.tau_next = make("tau")

    @staticmethod
    def nbytes(
        capacity: int,
        real_bytes: int,
        keep_position_prev: bool = False,
        keep_sps_stress: bool = False,
        spares: bool = True,
    ) -> int:
        """Device bytes that `ParticleArrays(capacity, ...)` allocates, spares included; with
        `spares` False, those of one copy of every array (solver/kept_state.py)."""
        per_particle = sum(
            spec.nbytes(real_bytes, spares)
            for spec in LAYOUT.values()
            if (keep_position_prev or not spec.symplectic_only)
            and (keep_sps_stress or not spec.sps_only)
        )
        return capacity * per_particle

    def load(
        self,
        position: np.ndarray,
        kind: np.ndarray,
        density: np.ndarray,
        pressure: np.ndarray,
        ghost: np.ndarray,
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
            "ghost": (ghost, real),
        }
        for name in STATE:
            values, dtype = initial[name]
            getattr(self, name).from_numpy(padded(values, dtype))
        if self.position_prev is not None:
            self.position_prev.from_numpy(padded(position, real))
        if self.tau is not None:
            self.tau.fill(0)
        self.removed.fill(0)
        self.count = n

    def reorder(self, order: ti.Ndarray, n: int) -> None:
        """Apply the permutation `order` (new place -> old index) to the first n particles."""
        current = self.state_arrays()
        spare = self.spare_arrays()
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
        if self.tau is not None:
            gather(self.tau, self.tau_next, order, n)
            self.swap_stress()
        self.count = n

    def state_arrays(self) -> list[ti.Ndarray]:
        """The STATE arrays as they are now (a reorder swaps each with its spare)."""
        return [getattr(self, name) for name in STATE]

    def spare_arrays(self) -> list[ti.Ndarray]:
        """The spares of the STATE arrays, in the same order."""
        return [self._spare[name] for name in STATE]

    def swap_stress(self) -> None:
        """Make tau_next, just written, the current SPS stress (a no-op without SPS)."""
        self.tau, self.tau_next = self.tau_next, self.tau

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
