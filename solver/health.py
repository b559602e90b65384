"""The run's numerical health, checked after every batch of steps: a non-finite value in the
particle state, a time step pushed down to its floor, too many particles removed.

The integration kernels count, as they write each particle, the particles whose new position,
velocity or density is NaN or infinite (tested on the bits, so Taichi's fast math cannot fold
the test away) and the particles they flag for removal, and report both with the time step:
the check costs no launch and no read-back of its own. Every removed particle is flagged once
before a sort drops it, so the flags counted so far are the removed particles. A non-finite
particle is also flagged (NaN fails the domain test), and both halves of the symplectic scheme
count, so a blow-up is caught at the step it happens, on every backend: a batch of steps
(solver/step_batch.py) stops at the step that found it, so the check after the batch names
that step.

The time-step floor: `time_step` never returns less than time.dt_min, so the CFL step has
reached the floor when the step taken equals dt_min although the output times allowed more
(`at_time_step_floor`); that step stops its batch too. The share of removed particles is
checked at the end of each batch (at most one batch late).
"""

from dataclasses import dataclass

import numpy as np

from solver.simulation import Simulation

FIRST_REPORTED = 5
"""How many offending particles a failure message names."""


class NumericalFailureError(RuntimeError):
    """The state went bad; the message names the step, the time and the offending particles."""


@dataclass(frozen=True)
class HealthLimits:
    """What counts as a failure: the time-step floor [s] and the removed share of the fluid."""

    dt_min: float
    max_removed: float


class HealthCheck:
    """The check of one simulation after its steps."""

    def __init__(self, sim: Simulation, limits: HealthLimits) -> None:
        self.sim = sim
        self.limits = limits

    def check(self) -> None:
        """Raise NumericalFailureError if the last step taken went bad."""
        sim, p = self.sim, self.sim.particles
        nonfinite, removed = sim.nonfinite, sim.flagged
        where = f"at step {sim.steps}, t = {sim.time:.9g} s"
        if nonfinite:
            bad = self._nonfinite_indices()
            first = (
                f"first: {self._describe(bad)}"
                if bad.size
                else "the symplectic scheme's mid-step sort may have dropped them already"
            )
            raise NumericalFailureError(
                f"non-finite values in {nonfinite} particle(s) {where}; {first}"
            )
        if sim.at_dt_floor:
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
        p, n = self.sim.particles, self.sim.particles.count
        a = np.linalg.norm(p.acceleration.to_numpy()[:n], axis=1)
        v = np.linalg.norm(p.velocity.to_numpy()[:n], axis=1)
        return np.argsort(-(a + v), kind="stable")

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
