"""Which device each process of an MPI job takes: one GPU per process where a machine has
several (by the process's rank on that machine), the CPU's cores shared out otherwise.

Taichi always runs on CUDA device 0 of the visible set (taichi-notes.md, section 3), so a
process is given its GPU through CUDA_VISIBLE_DEVICES before the backend starts; processes
beyond the GPU count share them round-robin (two ranks on one H200 run that way). On Vulkan,
Taichi takes the physical device TI_VISIBLE_DEVICE names (an index in the loader's order),
so a process is given one of the hardware devices the loader lists (software ones such as
lavapipe skipped) the same way. The GPU
count is read from the driver's /proc entries, not through the CUDA driver API: initialising
CUDA here would fix the visible set before it is chosen.
"""

from __future__ import annotations

import os
from pathlib import Path

from solver.backend import vulkan_devices
from solver.distributed.world import World

NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def nvidia_gpu_count() -> int:
    """GPUs the NVIDIA driver lists on this machine (0 without one)."""
    try:
        return len(list(NVIDIA_GPUS.iterdir()))
    except OSError:
        return 0


def share_devices(world: World, backend: str, threads: int | None) -> int | None:
    """Give this process its device; returns the CPU thread count it should use (None: the
    backend's default). A CUDA_VISIBLE_DEVICES or TI_VISIBLE_DEVICE set by the user is left
    as it is."""
    if backend in ("cuda", "auto") and "CUDA_VISIBLE_DEVICES" not in os.environ:
        gpus = nvidia_gpu_count()
        if gpus > 1:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(world.local_rank % gpus)
    if backend == "vulkan" and "TI_VISIBLE_DEVICE" not in os.environ:
        hardware = [i for i, (_, kind) in enumerate(vulkan_devices()) if kind != "software"]
        if len(hardware) > 1:
            os.environ["TI_VISIBLE_DEVICE"] = str(hardware[world.local_rank % len(hardware)])
    if backend == "cpu" and threads is None:
        return max(1, (os.cpu_count() or 1) // world.local_size)
    return threads
