"""The particle state on the device: one ndarray per quantity (structure of arrays).

The state arrays (STATE) follow the particles when the cell grid sorts them, in place: one
launch gathers them into a scratch array by the sort's order and copies them back, one vector
(or three scalars, or a vector and an integer) at a time, so a sort needs 16 bytes a particle
of scratch (f32) where a spare copy of every state array needed 68 (docs/performance.md,
"Cells thinner along x"). Their arrays never change, so the kernels a batch has queued after a
sort still read the sorted state (solver/batch_sort.py). The work arrays (acceleration, rates,
time-step terms, removal flags) are recomputed every step and are never reordered.
"""

from dataclasses import dataclass

import numpy as np
import taichi as ti

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
    reordered: bool = False
    """Follows the particles when the grid sorts them."""
    copies: int = 1
    """2 for the SPS stress, which the interaction writes into a second copy (tau_next)."""
    symplectic_only: bool = False
    """Allocated only for the symplectic scheme."""
    sps_only: bool = False
    """Allocated only for the SPS turbulence closure (physics.viscosity = "laminar_sps")."""

    def nbytes(self, real_bytes: int, all_copies: bool = True) -> int:
        """Bytes per particle of this array, with its second copy unless `all_copies` is
        False."""
        element = self.components * (real_bytes if self.real else INT_BYTES)
        return element * (self.copies if all_copies else 1)


LAYOUT: dict[str, ArraySpec] = {
    "position": ArraySpec(3, True, reordered=True),
    "velocity": ArraySpec(3, True, reordered=True),
    "velocity_prev": ArraySpec(3, True, reordered=True),
    "density": ArraySpec(1, True, reordered=True),
    "density_prev": ArraySpec(1, True, reordered=True),
    "pressure": ArraySpec(1, True, reordered=True),
    "kind": ArraySpec(1, False, reordered=True),
    "id": ArraySpec(1, False, reordered=True),
    "ghost": ArraySpec(3, True, reordered=True),
    "position_prev": ArraySpec(3, True, reordered=True, symplectic_only=True),
    "tau": ArraySpec(STRESS_COMPONENTS, True, reordered=True, copies=2, sps_only=True),
    "acceleration": ArraySpec(3, True),
    "density_rate": ArraySpec(1, True),
    "removed": ArraySpec(1, False),
}
"""Every array of ParticleArrays: what `__init__` allocates and the memory estimate counts.

removed is the removal flag (0 kept, else the reason); ghost is the vector from a boundary
particle to its ghost node (mDBC; zero for fluid particles and under DBC); tau is the SPS
stress tau / rho^2 (solver/physics/sps.py; zero for boundary particles), whose second copy
`tau_next` the interaction writes, then `swap_stress` makes it current.
"""

SCRATCH = (ArraySpec(3, True), ArraySpec(1, False))
"""The reorder's scratch: a vector (or three scalars) and an integer a particle."""

STATE = tuple(
    name
    for name, spec in LAYOUT.items()
    if spec.reordered and not spec.symplectic_only and not spec.sps_only
)
"""The arrays every run reorders, in the argument order of `reorder_state`."""


_VECTOR_PASSES = ((0, 6), (1, 7), (2, -1), (8, -1))
"""The passes of `reorder_state` through the vector scratch, by index into STATE: (a vector
array, the integer array taken beside it or -1); position with kind, velocity with id,
velocity_prev, ghost. The scalars density, density_prev and pressure (3, 4, 5) share the last
pass."""


@ti.func
def reorder_state(
    order: ti.template(), n, state: ti.template(), scratch: ti.template(), extra: ti.template()
):
    """Apply the permutation `order` (new place -> old index) to the first n particles of the
    STATE arrays `state`, in place through `scratch` (SCRATCH: a vector array, an integer
    array), then to each (array, its own scratch) pair of `extra` (position_prev through the
    vector scratch, tau through tau_next). To be called at the top level of a kernel: each
    gather and each copy back is a loop of its own."""
    for p in ti.static(range(len(_VECTOR_PASSES))):
        vector, integer = ti.static(_VECTOR_PASSES[p])
        for i in range(n):
            k = order[i]
            scratch[0][i] = state[vector][k]
            if ti.static(integer >= 0):
                scratch[1][i] = state[integer][k]
        for i in range(n):
            state[vector][i] = scratch[0][i]
            if ti.static(integer >= 0):
                state[integer][i] = scratch[1][i]
    for i in range(n):
        k = order[i]
        scratch[0][i] = ti.Vector([state[3][k], state[4][k], state[5][k]])
    for i in range(n):
        for c in ti.static(range(3)):
            state[3 + c][i] = scratch[0][i][c]
    for a in ti.static(range(len(extra))):
        for i in range(n):
            extra[a][1][i] = extra[a][0][order[i]]
        for i in range(n):
            extra[a][0][i] = extra[a][1][i]


@ti.kernel
def _reorder(
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
    vectors: Array,
    whole: Array,
):
    reorder_state(
        order, n,
        (position, velocity, velocity_prev, density, density_prev, pressure, kind, ids, ghost),
        (vectors, whole), (),
    )  # fmt: skip


@ti.kernel
def _reorder_one(
    order: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
    array: ti.types.ndarray(),
    scratch: ti.types.ndarray(),
):
    """Apply `order` to the first n rows of `array` in place, through `scratch`."""
    for i in range(n):
        scratch[i] = array[order[i]]
    for i in range(n):
        array[i] = scratch[i]


class ParticleArrays:
    """Device arrays for up to `capacity` particles in precision `dtype` (ti.f32 or ti.f64).

    `keep_position_prev` adds the position at the start of the step (symplectic scheme),
    `keep_sps_stress` the SPS stress and its second copy (tau, tau_next).
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
            return _allocate(spec, dtype, capacity)

        for name in LAYOUT:
            setattr(self, name, make(name))
        self.tau_next = make("tau")
        self.scratch = tuple(_allocate(spec, dtype, capacity) for spec in SCRATCH)
        """The reorder's scratch (SCRATCH), free between sorts."""

    @staticmethod
    def nbytes(
        capacity: int,
        real_bytes: int,
        keep_position_prev: bool = False,
        keep_sps_stress: bool = False,
        scratch: bool = True,
    ) -> int:
        """Device bytes that `ParticleArrays(capacity, ...)` allocates; with `scratch` False,
        those of one copy of every array, without the reorder's scratch and tau_next (what
        solver/kept_state.py keeps)."""
        per_particle = sum(
            spec.nbytes(real_bytes, scratch)
            for spec in LAYOUT.values()
            if (keep_position_prev or not spec.symplectic_only)
            and (keep_sps_stress or not spec.sps_only)
        )
        if scratch:
            per_particle += sum(spec.nbytes(real_bytes) for spec in SCRATCH)
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
        """Apply the permutation `order` (new place -> old index) to the first n particles, in
        place (`reorder_state`)."""
        _reorder(order, n, *self.state_arrays(), *self.scratch)
        if self.position_prev is not None:
            _reorder_one(order, n, self.position_prev, self.scratch[0])
        if self.tau is not None:
            _reorder_one(order, n, self.tau, self.tau_next)
        self.count = n

    def state_arrays(self) -> list[ti.Ndarray]:
        """The STATE arrays, in the order of `reorder_state`."""
        return [getattr(self, name) for name in STATE]

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


def _allocate(spec: ArraySpec, dtype, capacity: int) -> ti.Ndarray:
    """One array of `spec` for `capacity` particles, reals in `dtype`."""
    kind = dtype if spec.real else ti.i32
    if spec.components == 1:
        return ti.ndarray(kind, shape=capacity)
    return ti.Vector.ndarray(spec.components, kind, shape=capacity)
