"""Probes of a decomposed run: each point read by the process whose slab holds it.

A probe point's sums run over the particles within 2h of it, which the process whose counting
region (solver/counting_region.py) holds the point has, complete and in the same order as a
single process: so the values are bit for bit the single process's. Every process evaluates
all points on its device (one kernel, as DeviceProbes does), the processes swap these small
arrays, and each point takes the value of its owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from solver.output.device_probes import DeviceProbes

if TYPE_CHECKING:
    from solver.config import Config
    from solver.distributed.simulation import DistributedSimulation


class DistributedProbes(DeviceProbes):
    """DeviceProbes whose sums come from the process that owns each point (a collective)."""

    def __init__(self, cfg: Config, sim: DistributedSimulation) -> None:
        super().__init__(cfg, sim)
        self._x = self.points[:, 0]

    def point_sums(self) -> np.ndarray:
        local = super().point_sums()  # sorts a fresh simulation first: the slabs exist then
        sim: DistributedSimulation = self._sim
        every = sim.world.allgather(local)
        dtype = local.dtype.type
        owner = np.zeros(len(self._x), dtype=np.int64)
        for rank in range(sim.world.size):
            lo, hi = sim.slabs.region(rank, sim.grid.lo[0], sim.grid.cell_sizes[0], dtype)
            owner[~((self._x < lo) | (self._x >= hi))] = rank
        return np.stack([every[owner[k]][k] for k in range(len(owner))]) if len(owner) else local
