"""The halo exchange: every step, each process refreshes its ghosts from their owners.

Between two neighbour sorts the particles a process holds stay the same and in the same places
(sorted by cell and id at the last sort), so the exchange is a fixed pair of index lists per
neighbour: the owner packs the rows of its particles in the other's halo (in its local order),
the other unpacks them onto its ghosts from that owner (in its local order). Both lists are the
same particles ordered by (cell, id), so they match row for row without sending ids.

What travels is what a neighbour reads of a ghost before the ghost's own step would rewrite it:
position, velocity, density, pressure and the removal flag, and the SPS stress under that
closure. The previous-step velocity and density of a ghost need no exchange: each step sets
them from the exchanged current values, so they are the owner's too.
"""

import numpy as np
import taichi as ti

from solver.parallel.gather import gather, scatter, whole

COLUMNS = 9
"""Floats a packed row holds: position (3), velocity (3), density, pressure, removal flag."""


@ti.kernel
def _pack(
    position: ti.types.ndarray(ndim=1),
    velocity: ti.types.ndarray(ndim=1),
    density: ti.types.ndarray(ndim=1),
    pressure: ti.types.ndarray(ndim=1),
    removed: ti.types.ndarray(ndim=1),
    index: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
    rows: ti.types.ndarray(ndim=1),
):
    for i in range(n):
        k = index[i]
        x = position[k]
        v = velocity[k]
        rows[i] = ti.Vector(
            [x[0], x[1], x[2], v[0], v[1], v[2], density[k], pressure[k],
             ti.cast(removed[k], float)]
        )  # fmt: skip


@ti.kernel
def _unpack(
    rows: ti.types.ndarray(ndim=1),
    index: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n: ti.i32,
    position: ti.types.ndarray(ndim=1),
    velocity: ti.types.ndarray(ndim=1),
    density: ti.types.ndarray(ndim=1),
    pressure: ti.types.ndarray(ndim=1),
    removed: ti.types.ndarray(ndim=1),
):
    for i in range(n):
        k = index[i]
        r = rows[i]
        position[k] = ti.Vector([r[0], r[1], r[2]])
        velocity[k] = ti.Vector([r[3], r[4], r[5]])
        density[k] = r[6]
        pressure[k] = r[7]
        removed[k] = ti.cast(r[8], ti.i32)


class _Rows:
    """A device buffer of packed rows with room for at least `n`, grown by doubling."""

    def __init__(self, components: int, dtype) -> None:
        self.components = components
        self.dtype = dtype
        self.array = ti.Vector.ndarray(components, dtype, shape=1)

    def fit(self, n: int) -> ti.Ndarray:
        if n > self.array.shape[0]:
            size = 1 << max(n - 1, 1).bit_length()
            self.array = ti.Vector.ndarray(self.components, self.dtype, shape=size)
        return self.array


def _index_array(indices: np.ndarray) -> ti.Ndarray:
    padded = np.zeros(max(len(indices), 1), dtype=np.int32)
    padded[: len(indices)] = indices
    array = ti.ndarray(ti.i32, shape=padded.shape[0])
    array.from_numpy(padded)
    return array


class HaloExchange:
    """The index lists of one sort interval and the buffers that carry the rows."""

    def __init__(self, world, dtype, stress_components: int = 0) -> None:
        self.world = world
        self.dtype = dtype
        self.real = np.float64 if dtype == ti.f64 else np.float32
        self.stress_components = stress_components
        self._send_rows = _Rows(COLUMNS, dtype)
        self._recv_rows = _Rows(COLUMNS, dtype)
        self._send_stress = _Rows(max(stress_components, 1), dtype)
        self._recv_stress = _Rows(max(stress_components, 1), dtype)
        self.set_lists({}, {})
        self.rows_sent = 0
        """Rows sent so far, over all exchanges between sorts (for the summary)."""
        self.seconds = 0.0
        """Wall time spent exchanging (packing, MPI, unpacking)."""

    def set_lists(self, send: dict[int, np.ndarray], receive: dict[int, np.ndarray]) -> None:
        """The local indices to send to each process and to receive from each, in local
        order (see the module)."""
        self._peers = sorted(set(send) | set(receive))
        self._send_counts = [len(send.get(q, ())) for q in self._peers]
        self._recv_counts = [len(receive.get(q, ())) for q in self._peers]
        self._send_index = _index_array(
            np.concatenate([send.get(q, np.zeros(0, np.int64)) for q in self._peers] or [[]])
        )
        self._recv_index = _index_array(
            np.concatenate([receive.get(q, np.zeros(0, np.int64)) for q in self._peers] or [[]])
        )
        self._n_send = sum(self._send_counts)
        self._n_recv = sum(self._recv_counts)

    @property
    def ghosts(self) -> int:
        """Rows this process receives per exchange (its ghosts)."""
        return self._n_recv

    def exchange(self, particles) -> None:
        """Refresh the ghosts of `particles` from their owners (a collective of the peers)."""
        import time

        started = time.perf_counter()
        p = particles
        send = self._send_rows.fit(self._n_send)
        _pack(p.position, p.velocity, p.density, p.pressure, p.removed, self._send_index,
              self._n_send, send)  # fmt: skip
        received = self._swap(send.to_numpy()[: self._n_send], COLUMNS)
        recv = self._recv_rows.fit(self._n_recv)
        recv.from_numpy(whole(received, recv))
        _unpack(recv, self._recv_index, self._n_recv, p.position, p.velocity, p.density,
                p.pressure, p.removed)  # fmt: skip
        if self.stress_components:
            c = self.stress_components
            send = self._send_stress.fit(self._n_send)
            gather(p.tau, send, self._send_index, self._n_send)
            received = self._swap(send.to_numpy()[: self._n_send], c)
            recv = self._recv_stress.fit(self._n_recv)
            recv.from_numpy(whole(received, recv))
            scatter(recv, p.tau, self._recv_index, self._n_recv)
        self.rows_sent += self._n_send
        self.seconds += time.perf_counter() - started

    def _swap(self, outgoing: np.ndarray, components: int) -> np.ndarray:
        """Send each peer its block of `outgoing` and receive each peer's block for us."""
        comm = self.world.comm
        incoming = np.empty((self._n_recv, components), dtype=self.real)
        outgoing = np.ascontiguousarray(outgoing)
        requests = []
        sent = received = 0
        for q, n_send, n_recv in zip(self._peers, self._send_counts, self._recv_counts,
                                     strict=True):  # fmt: skip
            if n_recv:
                requests.append(comm.Irecv(incoming[received : received + n_recv], source=q))
            if n_send:
                requests.append(comm.Isend(outgoing[sent : sent + n_send], dest=q))
            sent += n_send
            received += n_recv
        if requests:
            from mpi4py import MPI

            MPI.Request.Waitall(requests)
        return incoming
