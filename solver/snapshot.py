"""A host-side copy of the particle state at one instant, as observers see it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Snapshot:
    """The active particles at simulated time `time` (seconds) after `step` steps.

    Arrays are numpy, one row per active particle, in no particular order (match by `id`):
    position (n, 3) and velocity (n, 3) in float32 or float64, density and pressure (n,),
    kind (n,) int32 holding `ParticleKind` codes, id (n,) int32, stable over the run.
    """

    time: float
    step: int
    position: np.ndarray
    velocity: np.ndarray
    density: np.ndarray
    pressure: np.ndarray
    kind: np.ndarray
    id: np.ndarray

    @property
    def count(self) -> int:
        """Number of particles in the snapshot."""
        return int(self.id.shape[0])


ARRAYS = ("position", "velocity", "density", "pressure", "kind", "id")
"""The Snapshot's arrays, in file order."""

STATE_KEYS = ("count", "steps", "time", "particles.removed") + tuple(
    f"particles.{name}" for name in ARRAYS
)
"""What `snapshot_from_state` reads of a `Simulation.state()`: a queued snapshot keeps only
these (44 of the state's 94 bytes a particle in the seed case)."""


def snapshot_from_state(state: dict[str, np.ndarray]) -> Snapshot:
    """The snapshot of a `Simulation.state()` copy (or of its STATE_KEYS): what
    `Simulation.snapshot()` would have returned at that moment, bit for bit (the live
    particles, cut at the count, without those flagged for removal).

    At a snapshot time the time loop copies the whole state anyway (it is the last good state a
    numerical failure leaves in checkpoint.npz), and the snapshot's arrays are part of it: cutting
    the snapshot from that copy saves a second copy of the same arrays off the device.
    """
    count = int(state["count"])
    fields = {name: state[f"particles.{name}"][:count] for name in ARRAYS}
    keep = state["particles.removed"][:count] == 0
    if not keep.all():
        fields = {name: values[keep] for name, values in fields.items()}
    return Snapshot(time=float(state["time"]), step=int(state["steps"]), **fields)
