"""The run's numerical health, checked after every step: a non-finite value in the particle
state, a time step pushed down to its floor, too many particles removed.

One small kernel scans the live particles (including those just flagged for removal, which
still hold the values that got them flagged) for NaN or infinity in position, velocity, density
and pressure, and counts the flags still pending; the grid's drop counters give the rest of
the removed particles. The test is on the bits (exponent all ones), so it holds under Taichi's
fast math, which may fold `x != x` to false. It reads 8 numbers per particle once, next to the
hundreds of neighbour reads of the interaction, and brings 2 integers to the host: on 2 CPU
cores 1.5 ms beside a 1.3 s step for the seed case (0.1 %), 0.65 ms beside 20 ms for the
quick case (3 %, mostly launch and read-back latency). On a GPU it adds one small kernel and
one read-back to the step's existing one (of the time-step maxima).

A particle that turns non-finite is flagged for removal by the integrator (NaN fails the domain
test), so without this scan it would be dropped and counted as "left the domain". In the
symplectic scheme the sort between its two half steps drops such particles before the end of
the step; there the removed-share limit is what catches a blow-up.

The time-step floor: `time_step` never returns less than time.dt_min, so the CFL step has
reached the floor when the step taken equals dt_min although the output times allowed more.
"""

from dataclasses import dataclass

import numpy as np
import taichi as ti

from solver.simulation import Simulation

FIRST_REPORTED = 5
"""How many offending particles a failure message names."""


@ti.func
def _finite(x):
    """Whether the float x is finite, from its bits (immune to fast-math folding)."""
    result = True
    if ti.static(ti.lang.impl.get_runtime().default_fp == ti.f64):
        high = ti.cast(ti.bit_cast(x, ti.u64) >> 32, ti.u32)
        result = (high & 0x7FFFFFFF) < 0x7FF00000
    else:
        result = (ti.bit_cast(x, ti.u32) & 0x7FFFFFFF) < 0x7F800000
    return result


@ti.kernel
def _scan(
    position: ti.types.ndarray(ndim=1),
    velocity: ti.types.ndarray(ndim=1),
    density: ti.types.ndarray(ndim=1),
    pressure: ti.types.ndarray(ndim=1),
    removed: ti.types.ndarray(dtype=ti.i32, ndim=1),
    dropped: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
    out: ti.types.ndarray(dtype=ti.i32, ndim=1),
):
    """out = [non-finite particles, removed particles (pending flags + dropped so far)]."""
    out[0] = 0
    out[1] = 0
    for k in range(dropped.shape[0]):
        ti.atomic_add(out[1], dropped[k])
    for i in range(n):
        ok = _finite(density[i]) and _finite(pressure[i])
        for a in ti.static(range(3)):
            ok = ok and _finite(position[i][a]) and _finite(velocity[i][a])
        if not ok:
            ti.atomic_add(out[0], 1)
        if removed[i] != 0:
            ti.atomic_add(out[1], 1)


class NumericalFailureError(RuntimeError):
    """The state went bad; the message names the step, the time and the offending particles."""


@dataclass(frozen=True)
class HealthLimits:
    """What counts as a failure: the time-step floor [s] and the removed share of the fluid."""

    dt_min: float
    max_removed: float


class HealthCheck:
    """The per-step check of one simulation."""

    def __init__(self, sim: Simulation, limits: HealthLimits) -> None:
        self.sim = sim
        self.limits = limits
        self._out = ti.ndarray(ti.i32, shape=2)

    def check(self, dt_limit: float) -> None:
        """Raise NumericalFailureError if the step just taken (allowed up to dt_limit) went bad."""
        sim, p = self.sim, self.sim.particles
        _scan(
            p.position, p.velocity, p.density, p.pressure, p.removed, sim.grid.dropped,
            p.count, self._out,
        )  # fmt: skip
        nonfinite, removed = (int(v) for v in self._out.to_numpy())
        where = f"at step {sim.steps}, t = {sim.time:.9g} s"
        if nonfinite:
            raise NumericalFailureError(
                f"non-finite values in {nonfinite} particle(s) {where}; first: "
                + self._describe(self._nonfinite_indices())
            )
        if sim.dt <= self.limits.dt_min < dt_limit:
            raise NumericalFailureError(
                f"time step at its floor time.dt_min = {self.limits.dt_min:g} s {where}; "
                "fastest particles: " + self._describe(self._fastest_indices())
            )
        if removed > self.limits.max_removed * sim.initial_fluid:
            reasons = ", ".join(f"{k} {v}" for k, v in sim.removed_by_reason().items())
            flagged = np.flatnonzero(p.removed.to_numpy()[: p.count])
            latest = f"; latest: {self._describe(flagged)}" if flagged.size else ""
            raise NumericalFailureError(
                f"{removed} of {sim.initial_fluid} fluid particles removed ({reasons}), more "
                f"than physics.max_removed = {self.limits.max_removed:g} of them, {where}" + latest
            )

    def _nonfinite_indices(self) -> np.ndarray:
        """Indices of the live particles holding a NaN or an infinity, in array order."""
        p, n = self.sim.particles, self.sim.particles.count
        bad = np.zeros(n, dtype=bool)
        for name in ("position", "velocity", "density", "pressure"):
            values = getattr(p, name).to_numpy()[:n].reshape(n, -1)
            bad |= ~np.all(np.isfinite(values), axis=1)
        return np.flatnonzero(bad)

    def _fastest_indices(self) -> np.ndarray:
        """Indices of the particles with the largest |a| + |v|, the ones that set dt."""
        terms = self.sim.particles.dt_terms.to_numpy()[: self.sim.particles.count]
        return np.argsort(-(terms[:, 0] + terms[:, 1]), kind="stable")

    def _describe(self, indices: np.ndarray) -> str:
        """The first FIRST_REPORTED particles of `indices`: id, position, velocity, density."""
        p = self.sim.particles
        ids, x, v, rho = (
            getattr(p, name).to_numpy() for name in ("id", "position", "velocity", "density")
        )

        def vector(values: np.ndarray) -> str:
            return "(" + ", ".join(f"{c:.6g}" for c in values) + ")"

        return "; ".join(
            f"id {ids[i]} at x = {vector(x[i])}, v = {vector(v[i])}, rho = {rho[i]:.6g}"
            for i in indices[:FIRST_REPORTED]
        )
