"""Will the run fit? The device memory a case needs, estimated from the config alone, against
what the device has free, checked before anything large is allocated.

The estimate adds up the same sizes the solver allocates: the particle arrays (their LAYOUT
table), the cell grid with its sort and scan scratch, and the time-step reduction, for the
particle count the scene will have (counted from the lattice, not built), and apart from them
the copy of the state a run keeps as its last good one (solver/kept_state.py). On the CPU
backend the device is the host's RAM, which also holds the scene's host arrays.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from solver.backend import BackendInfo, load_libcuda
from solver.config import Config, ConfigError
from solver.neighbor_lists import LIST_SKIN, NeighbourLists
from solver.neighbors import (
    BLOCKS,
    CPU_CELLS_PER_SUPPORT,
    GPU_CELLS_PER_SUPPORT,
    MAX_KEYS,
    CellGrid,
    default_x_refinement,
    grid_dims,
)
from solver.parallel.reduce import SlotMaximum
from solver.particles import ParticleArrays
from solver.physics.pair_halves import PairSums
from solver.scene import fluid_count_bound, particle_count_bound
from solver.step_batch import batch_nbytes

__all__ = [
    "HOST_SCENE_BYTES",
    "InsufficientMemoryError",
    "MemoryEstimate",
    "available_bytes",
    "check_memory",
    "estimate",
    "estimate_bytes",
]

HOST_SCENE_BYTES = 3 * 8 + 4
"""Host bytes per particle of the scene kept for the whole run: f64 positions and i32 kinds."""

MAX_INDEX = 2**31 - 2
"""Largest particle or cell count 32-bit ids and cell keys can number (one key is a sentinel)."""

_TIMESTEP_COMPONENTS = 3
"""Components of the time-step maxima reduced each step (|a|, |v|, viscous rate)."""


class InsufficientMemoryError(ConfigError):
    """The case cannot fit on the chosen device; a bad-input error (exit code 2)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """What a case needs on the device, and the numbers it comes from."""

    particles: int
    """Particle capacity (an upper bound of the scene's count)."""
    cells: int
    """Cells of the neighbour grid."""
    device_bytes: int
    """Bytes of every device array the simulation allocates."""
    kept_bytes: int = 0
    """Bytes of the copy of its state a run keeps as the last good one (solver/kept_state.py),
    on the device where it fits, else on the host."""
    cpu_bytes: int = 0
    """Bytes of the arrays only the CPU backend allocates: the sums of its interaction's pair
    halves (solver/physics/pair_halves.py) and its neighbour lists (solver/neighbor_lists.py)."""

    def device_bytes_on(self, backend: str) -> int:
        """Bytes of every array the simulation allocates on `backend`."""
        return self.device_bytes + (self.cpu_bytes if backend == "cpu" else 0)

    def bytes_on(self, backend: str) -> int:
        """What the simulation needs on `backend`'s memory: the CPU's RAM also holds the
        scene."""
        host = self.particles * HOST_SCENE_BYTES if backend == "cpu" else 0
        return self.device_bytes_on(backend) + host


def estimate(cfg: Config) -> MemoryEstimate:
    """The device memory of `cfg`'s run, computed from the config without building the scene."""
    capacity = particle_count_bound(cfg)
    real_bytes = 8 if cfg.physics.precision == "f64" else 4
    symplectic = cfg.time.integrator == "symplectic"
    sps = cfg.physics.viscosity == "laminar_sps"
    # The finest grid any backend takes by default (the GPUs'): an upper bound on the CPU.
    per_support = cfg.neighbors.cells_per_support or max(
        CPU_CELLS_PER_SUPPORT, GPU_CELLS_PER_SUPPORT
    )
    x_refinement = cfg.neighbors.x_refinement or default_x_refinement(
        False, cfg.domain.min, cfg.domain.max, cfg.support_radius, per_support
    )  # the GPUs' refinement, at least the CPU's
    cells = 1
    for n in grid_dims(
        cfg.domain.min, cfg.domain.max, cfg.support_radius, per_support, x_refinement
    ):  # fmt: skip
        cells *= n
    arrays = partial(
        ParticleArrays.nbytes, capacity, real_bytes, keep_position_prev=symplectic,
        keep_sps_stress=sps,
    )  # fmt: skip
    device = (
        arrays()
        + CellGrid.nbytes(cells, capacity)
        + SlotMaximum.nbytes(_TIMESTEP_COMPONENTS, real_bytes)
        + batch_nbytes(real_bytes)
    )
    kept = arrays(scratch=False) + CellGrid.offsets_nbytes(cells)
    halves = cfg.neighbors.pair_halves and not sps  # several processes gather: an upper bound
    pair_sums = PairSums.nbytes(fluid_count_bound(cfg), real_bytes) if halves else 0
    skin = LIST_SKIN if cfg.neighbors.skin is None else cfg.neighbors.skin
    listed = halves and cfg.neighbors.lists and skin > 0
    lists = NeighbourLists.nbytes_bound(cfg, capacity, skin) if listed else 0
    return MemoryEstimate(
        particles=capacity,
        cells=cells,
        device_bytes=device,
        kept_bytes=kept,
        cpu_bytes=pair_sums + lists,
    )


def estimate_bytes(cfg: Config, backend: str) -> int:
    """Bytes `cfg`'s run needs on `backend` (see `estimate`)."""
    return estimate(cfg).bytes_on(backend)


def available_bytes(backend: str) -> int | None:
    """Free memory of the running backend's device, or None where it cannot be read cheaply.

    CUDA: the driver's free device memory (after Taichi's own reservations). CPU: the RAM
    available to new allocations, within a cgroup (container) limit where there is one.
    Vulkan and Metal: None (their heaps are not queried).
    """
    if backend == "cuda":
        return _cuda_free_bytes()
    if backend == "cpu":
        return _host_available_bytes()
    return None


def _cuda_free_bytes() -> int | None:
    """cuMemGetInfo on the current context, else on device 0's primary context."""
    cuda = load_libcuda()
    if cuda is None:
        return None
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    if cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0:
        return free.value
    device, context = ctypes.c_int(), ctypes.c_void_p()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) != 0:
        return None
    try:
        if cuda.cuCtxPushCurrent_v2(context) != 0:
            return None
        try:
            ok = cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
        finally:
            cuda.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    finally:
        cuda.cuDevicePrimaryCtxRelease_v2(device)
    return free.value if ok else None


def _host_available_bytes() -> int | None:
    """MemAvailable (Linux), else free pages (other POSIX), else hw.memsize (macOS); capped by
    the cgroup v2 limit of this process."""
    available = _meminfo_available()
    if available is None and sys.platform == "darwin":
        available = _sysctl_memsize()
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    limit = _cgroup_room()
    return available if limit is None else min(available, limit)


def _meminfo_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _sysctl_memsize() -> int | None:
    """Physical memory of a Mac (it has no cheap "available" figure)."""
    try:
        out = subprocess.run(
            ["sysctl", "-n", "hw.memsize"], capture_output=True, text=True, check=True
        )
        return int(out.stdout.strip())
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None


def _cgroup_room() -> int | None:
    """memory.max - memory.current of this process's cgroup v2, or None when unlimited."""
    try:
        group = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1]
        base = Path("/sys/fs/cgroup") / group.lstrip("/")
        limit = (base / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(int(limit) - int((base / "memory.current").read_text()), 0)
    except (OSError, IndexError, ValueError):
        return None


def _size(n: int) -> str:
    """Bytes in binary units, e.g. "1.5 GiB"."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024.0 or unit == "TiB":
            break
        value /= 1024.0
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def check_memory(cfg: Config, info: BackendInfo) -> bool:
    """Refuse, before allocating, a run that cannot fit on the backend `info` describes;
    return whether the run's last good state is to be kept on the device.

    The kept state (`MemoryEstimate.kept_bytes`) goes on the device where it fits beside the
    simulation, else on the host (a GPU run then copies its state to the host at every output
    time, as before 2026-12-03, and says so on stderr); on the CPU both are the same RAM.
    Raises InsufficientMemoryError (exit 2) with what the run needs and what the device has;
    where the free memory cannot be read, says so on stderr and lets the run go on.
    """
    need = estimate(cfg)
    fix = f"use a larger particles.dp (now {cfg.dp:g}) or a smaller tank and domain"
    if need.particles > MAX_INDEX or BLOCKS * need.cells >= MAX_KEYS:
        raise InsufficientMemoryError(
            f"{cfg.source}: particles.dp = {cfg.dp:g} gives {need.particles:,} particles and "
            f"{need.cells:,} grid cells; at most {MAX_INDEX:,} particles and "
            f"{(MAX_KEYS - 1) // BLOCKS:,} cells fit 32-bit indices; {fix}"
        )
    needed = need.bytes_on(info.name)
    if info.name == "cpu":
        needed += need.kept_bytes
    free = available_bytes(info.name)
    if free is None:
        print(
            f"dambreak run: note: free memory of {info.name} is not known here; the run needs "
            f"about {_size(needed)} ({need.particles:,} particles), not checked",
            file=sys.stderr,
        )
        return True
    if info.name != "cpu" and needed <= free < needed + need.kept_bytes:
        print(
            f"dambreak run: note: {info.device} has room for the run ({_size(needed)}) but "
            f"not for a copy of its last good state beside it ({_size(need.kept_bytes)} "
            "more): the state is kept on the host, copied at every output time",
            file=sys.stderr,
        )
        return False
    if needed > free:
        memory = "RAM" if info.name == "cpu" else "device memory"
        raise InsufficientMemoryError(
            f"{cfg.source}: the run needs about {_size(needed)} of {memory} "
            f"({need.particles:,} particles, {need.cells:,} grid cells) but {info.device} "
            f"has {_size(free)} available; {fix}"
        )
    return True
