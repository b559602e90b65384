"""The SPIR-V modules in a Taichi 1.7.4 offline-cache folder, named after their kernels.

Found by experiment (taichi 1.7.4, Vulkan): the cache folder holds `ticache.tcb` (the index) and
one `T<hash>.tic` file per compiled kernel. A .tic file starts with b"TIC\\0", a u32 format
version, a u64 length L and a u64 payload length, then L bytes of JSON metadata
(`kernel_attribs.name` is the kernel's name, `kernel_attribs.tasks_attribs[k].name` that of its
k-th task), then a u64 module count and the SPIR-V modules of the tasks in the same order, each
preceded by its u64 word count. Taichi compiles one module per offloaded task (each top-level
loop, plus a serial task for the code outside loops), and every module's entry point is just
"main", so names come from the metadata. Modules are found by
their magic number, not by offsets, so a change in the packing shows up as a count mismatch
(named by position) rather than as garbage.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from solver.metal.spirv import find_modules

TIC_MAGIC = b"TIC\0"
TIC_HEADER = struct.Struct("<4sIQQ")


@dataclass(frozen=True)
class CachedTask:
    """One compiled task: its kernel, its own name, and its SPIR-V module."""

    kernel: str
    task: str
    module: bytes
    source: Path


def read_kernel_file(path: Path) -> list[CachedTask]:
    """The tasks of one .tic file (names from its metadata where it can be read)."""
    data = path.read_bytes()
    kernel, task_names, payload_start = path.stem, [], 0
    if data.startswith(TIC_MAGIC) and len(data) >= TIC_HEADER.size:
        _, _, meta_length, _ = TIC_HEADER.unpack_from(data)
        try:
            meta = json.loads(data[TIC_HEADER.size : TIC_HEADER.size + meta_length])
            attributes = meta["kernel_attribs"]
            kernel = attributes["name"]
            task_names = [task["name"] for task in attributes["tasks_attribs"]]
            payload_start = TIC_HEADER.size + meta_length
        except (ValueError, KeyError, TypeError):
            task_names = []
    modules = find_modules(data[payload_start:])
    if len(task_names) != len(modules):
        task_names = [f"{kernel}#{k}" for k in range(len(modules))]
    return [
        CachedTask(kernel, name, module, path)
        for name, module in zip(task_names, modules, strict=True)
    ]


def read_cache(folder: Path) -> list[CachedTask]:
    """Every task of every kernel in an offline-cache folder, in file-name order."""
    tasks: list[CachedTask] = []
    for path in sorted(Path(folder).rglob("*.tic")):
        tasks.extend(read_kernel_file(path))
    return tasks
