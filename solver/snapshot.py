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
