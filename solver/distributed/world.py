"""The MPI job a `dambreak run` belongs to, if any: its processes, and how they agree.

A plain `dambreak run` never imports mpi4py. Under `mpiexec -n K` (K > 1) the launcher's
environment says so before anything starts (MPICH and Intel MPI set PMI_SIZE, Open MPI
OMPI_COMM_WORLD_SIZE, Slurm's srun PMI_SIZE or SLURM_NTASKS), and only then is mpi4py imported
(the optional extra `pip install -e '.[mpi]'`, which brings an MPI runtime from PyPI too).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS")
"""Environment variables in which MPI launchers give the number of processes."""


class MpiUnavailableError(RuntimeError):
    """Launched by mpiexec with several processes, but mpi4py is not installed."""


def launched_processes(environ: dict[str, str] | None = None) -> int:
    """How many processes the launcher started this one among (1 outside an MPI launch)."""
    environ = os.environ if environ is None else environ
    for name in SIZE_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


@dataclass
class World:
    """The processes of an MPI job (mpi4py's COMM_WORLD), rank 0 writing the output.

    `World.alone()` is a job of one process without MPI (comm None): the decomposed solver
    then runs its split step on one slab, which tests and the Metal check use to compare it
    with the one-launch step and to compile its kernels where mpi4py is not installed.
    """

    comm: Any
    rank: int
    size: int
    local_rank: int
    """Rank among the processes on this machine (which GPU this process takes)."""
    local_size: int

    @classmethod
    def alone(cls) -> World:
        """A job of this process only, needing no MPI."""
        return cls(None, 0, 1, 0, 1)

    @property
    def is_root(self) -> bool:
        """Whether this process writes the run's files."""
        return self.rank == 0

    def max(self, values: np.ndarray) -> np.ndarray:
        """Componentwise maximum over all processes (exact, whatever the order)."""
        return self._allreduce(values, "MAX")

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Componentwise sum over all processes (for integer counts: exact)."""
        return self._allreduce(values, "SUM")

    def _allreduce(self, values: np.ndarray, op: str) -> np.ndarray:
        if self.comm is None:
            return np.array(values)
        from mpi4py import MPI

        out = np.empty_like(values)
        self.comm.Allreduce(np.ascontiguousarray(values), out, op=getattr(MPI, op))
        return out

    def any(self, flag: bool) -> bool:
        """Whether any process says yes."""
        if self.comm is None:
            return bool(flag)
        from mpi4py import MPI

        return bool(self.comm.allreduce(bool(flag), op=MPI.LOR))

    def alltoall(self, items: list[Any]) -> list[Any]:
        """Item q to process q; returns what each process sent to this one."""
        return list(items) if self.comm is None else self.comm.alltoall(items)

    def gather(self, item: Any) -> list[Any] | None:
        """Every process's item on rank 0 (None elsewhere)."""
        return [item] if self.comm is None else self.comm.gather(item, root=0)

    def allgather(self, item: Any) -> list[Any]:
        """Every process's item, on every process."""
        return [item] if self.comm is None else self.comm.allgather(item)

    def on_root(self, action: Callable[[], T]) -> T:
        """Run `action` on rank 0 only; every process then returns its result or raises the
        exception it raised, so that a failure there (an output folder that exists) ends
        every process the same way instead of leaving them waiting."""
        outcome: tuple[bool, Any] = (True, None)
        if self.is_root:
            try:
                outcome = (True, action())
            except Exception as error:  # noqa: BLE001 - handed to every process, then raised
                outcome = (False, error)
        ok, value = outcome if self.comm is None else self.comm.bcast(outcome, root=0)
        if not ok:
            raise value
        return value

    def agree(self, action: Callable[[], T]) -> T:
        """Run `action` on every process; if it fails on any, every process raises the
        first failure (by rank), so that none goes on alone into the run's collectives."""
        try:
            outcome: tuple[bool, Any] = (True, action())
        except Exception as error:  # noqa: BLE001 - handed to every process, then raised
            outcome = (False, error)
        failures = [error for ok, error in self.allgather(
            (outcome[0], None if outcome[0] else outcome[1])) if not ok]  # fmt: skip
        if failures:
            raise failures[0]
        return outcome[1]

    def abort(self, code: int) -> None:
        """End every process of the job with exit status `code` (MPI_Abort)."""
        self.comm.Abort(code)


def join_world() -> World | None:
    """The MPI job of this process, or None for a single process (no mpi4py needed)."""
    if launched_processes() <= 1:
        return None
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise MpiUnavailableError(
            f"started by an MPI launcher with {launched_processes()} processes, but mpi4py is "
            "not installed: pip install -e '.[mpi]' (it brings an MPI runtime too)"
        ) from error
    comm = MPI.COMM_WORLD
    if comm.Get_size() <= 1:
        return None
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    return World(comm, comm.Get_rank(), comm.Get_size(), local.Get_rank(), local.Get_size())
