"""Moving particle rows between the device and the host at a sort: only the rows that change
hands travel.

At a neighbour sort a process keeps most of its particles; it sends the few that left its slab
to their new owner and copies of those in a neighbour's halo, and receives the same from the
others. `take` gathers the chosen rows of the reordered state arrays on the device and copies
only those to the host; `put` writes received rows behind the ones held, on the device. The
arrays are then put in (cell, id) order by the particles' own reorder (solver/particles.py),
so a sort moves a few bytes a particle over the host link (its cell, flag and id, and the
new order) instead of the whole state.
"""

import numpy as np
import taichi as ti

from solver.parallel.gather import gather, scatter, whole
from solver.particles import STATE, ParticleArrays


def moved_names(particles: ParticleArrays) -> list[str]:
    """The arrays a particle takes with it: the reordered state, the symplectic scheme's
    start-of-step position and the SPS stress if any (the work arrays are rewritten before
    they are read again)."""
    names = list(STATE)
    if particles.position_prev is not None:  # a mid-step sort carries the step's start
        names.append("position_prev")
    if particles.tau is not None:
        names.append("tau")
    return names


class RowStaging:
    """Device buffers, one per moved array, grown by doubling, for rows on their way."""

    def __init__(self, particles: ParticleArrays) -> None:
        self._particles = particles
        self._buffers: dict[str, ti.Ndarray] = {}
        self._index = ti.ndarray(ti.i32, shape=1)

    def _buffer(self, name: str, n: int) -> ti.Ndarray:
        like = getattr(self._particles, name)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.shape[0] < n:
            size = 1 << max(n - 1, 1).bit_length()
            if like.element_shape:
                buffer = ti.Vector.ndarray(like.element_shape[0], like.dtype, shape=size)
            else:
                buffer = ti.ndarray(like.dtype, shape=size)
            self._buffers[name] = buffer
        return buffer

    def _indices(self, indices: np.ndarray) -> ti.Ndarray:
        if self._index.shape[0] < len(indices):
            self._index = ti.ndarray(ti.i32, shape=1 << max(len(indices) - 1, 1).bit_length())
        padded = np.zeros(self._index.shape[0], dtype=np.int32)
        padded[: len(indices)] = indices
        self._index.from_numpy(padded)
        return self._index

    def take(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The rows at `indices` of every moved array, on the host."""
        n = len(indices)
        index = self._indices(indices)
        rows = {}
        for name in moved_names(self._particles):
            buffer = self._buffer(name, n)
            gather(getattr(self._particles, name), buffer, index, n)
            rows[name] = buffer.to_numpy()[:n]
        return rows

    def put(self, rows: dict[str, np.ndarray], start: int) -> None:
        """Write `rows` into every moved array at places start, start + 1, ..."""
        n = len(next(iter(rows.values())))
        if n == 0:
            return
        if start + n > self._particles.capacity:
            raise RuntimeError(
                f"{start + n} particles for room for {self._particles.capacity}: the slab "
                "holds more than the whole case"
            )
        index = self._indices(np.arange(start, start + n))
        for name, values in rows.items():
            buffer = self._buffer(name, n)
            buffer.from_numpy(whole(values, buffer))
            scatter(buffer, getattr(self._particles, name), index, n)
