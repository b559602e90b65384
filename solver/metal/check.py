"""The Metal check: every kernel of the solver compiled on Vulkan, each SPIR-V module validated
with spirv-val, converted to Metal Shading Language with spirv-cross as Taichi's Metal backend
converts it, and read for what Metal cannot run (solver.metal.spirv).

Taichi 1.7.4's Metal backend (taichi/rhi/metal/metal_device.mm, create_compute_pipeline) runs
SPIRV-Cross's CompilerMSL with `enable_decoration_binding = true`, the default platform (macOS)
and MSL 2.3 on devices with 64-bit integer math (Apple3 and newer, so every Apple Silicon Mac),
else MSL 2.1 where subgroup operations exist. spirv-cross's command line takes the same options:
`--msl --msl-decoration-binding --msl-version 20300` (20100 for a module without the Int64
capability). What this proves and what it cannot: docs/metal.md.

Exit status: 0 when every kernel passes, 1 when one fails, 2 when the check cannot run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from solver.backend import BackendError, reset_taichi, start_backend
from solver.metal.spirv import METAL_MAX_BUFFERS, inspect_module
from solver.metal.taichi_cache import CachedTask, read_cache

TOOLS = ("spirv-val", "spirv-cross")
MSL_BUFFER = re.compile(r"\[\[buffer\((\d+)\)\]\]")
MSL_DOUBLE = re.compile(r"\bdouble\d?\b")


@dataclass
class TaskVerdict:
    """The outcome for one task (one SPIR-V module)."""

    task: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    buffers: int = 0
    msl_version: int = 0


def msl_version(declares_int64: bool) -> int:
    """The MSL version Taichi's Metal backend asks SPIRV-Cross for (see the module docstring)."""
    return 20300 if declares_int64 else 20100


def check_task(task: CachedTask, scratch: Path) -> TaskVerdict:
    """Validate, convert and inspect one module."""
    verdict = TaskVerdict(task.task)
    spv = scratch / f"{task.task}.spv"
    spv.write_bytes(task.module)
    report = inspect_module(task.module)
    verdict.problems.extend(report.problems)
    verdict.buffers = len(report.buffer_bindings)
    if report.float_atomics:
        verdict.notes.append(
            f"native {', '.join(sorted(set(report.float_atomics)))} here, a CAS loop on Metal"
        )
    validation = subprocess.run(["spirv-val", str(spv)], capture_output=True, text=True)
    if validation.returncode != 0:
        verdict.problems.append("spirv-val: " + _first_line(validation.stderr + validation.stdout))
    verdict.msl_version = msl_version(report.declares_int64)
    msl = scratch / f"{task.task}.metal"
    conversion = subprocess.run(
        ["spirv-cross", str(spv), "--msl", "--msl-decoration-binding",
         "--msl-version", str(verdict.msl_version), "--output", str(msl)],
        capture_output=True, text=True,
    )  # fmt: skip
    if conversion.returncode != 0 or not msl.exists():
        verdict.problems.append("spirv-cross: " + _first_line(conversion.stderr))
        return verdict
    text = msl.read_text()
    indices = [int(i) for i in MSL_BUFFER.findall(text)]
    if indices and max(indices) >= METAL_MAX_BUFFERS:
        verdict.problems.append(f"MSL uses [[buffer({max(indices)})]], Metal has 0..30")
    if MSL_DOUBLE.search(text):
        verdict.problems.append("the MSL declares a double, which Metal does not have")
    return verdict


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "failed without a message"


def check_cache(folder: Path, out=sys.stdout) -> tuple[int, int, int]:
    """Check every module in an offline-cache folder, one line per kernel.

    Returns (kernels, tasks, failed kernels).
    """
    tasks = read_cache(folder)
    kernels: dict[str, list[TaskVerdict]] = {}
    with tempfile.TemporaryDirectory(prefix="metal-msl-") as scratch:
        for task in tasks:
            kernels.setdefault(task.kernel, []).append(check_task(task, Path(scratch)))
    failed = 0
    width = max((len(k) for k in kernels), default=0)
    for kernel, verdicts in sorted(kernels.items()):
        problems = [f"{v.task}: {p}" for v in verdicts for p in v.problems]
        notes = sorted({n for v in verdicts for n in v.notes})
        versions = sorted({v.msl_version for v in verdicts})
        line = (
            f"{'FAIL' if problems else 'PASS'}  {kernel:<{width}}  {len(verdicts)} task(s), "
            f"at most {max(v.buffers for v in verdicts)} buffers, MSL "
            + "/".join(f"{v // 10000}.{v // 100 % 100}" for v in versions)
        )
        if notes:
            line += "; note: " + "; ".join(notes)
        print(line, file=out)
        for problem in problems:
            print(f"      {problem}", file=out)
        failed += bool(problems)
    return len(kernels), len(tasks), failed


def missing_tools() -> list[str]:
    """The SPIR-V tools this check needs that are not on PATH."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def compile_kernels(folder: Path, verbose: bool = False) -> None:
    """Run every kernel of the solver on Vulkan with `folder` as the offline cache; Taichi
    writes the cache when it is reset."""
    from solver.metal.workload import exercise_all

    start_backend("vulkan", offline_cache_dir=folder)
    try:
        exercise_all(report=(lambda line: print(line, flush=True)) if verbose else (lambda _: None))
    finally:
        reset_taichi()


def build_parser() -> argparse.ArgumentParser:
    """The command line of scripts/check_metal.py."""
    parser = argparse.ArgumentParser(
        prog="check_metal.py",
        description="Check that every kernel of the solver converts to Metal Shading Language "
        "and uses nothing Metal lacks (64-bit floats or atomics, more than 31 buffers, "
        "subgroup-size dependent operations).",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="check an existing Taichi offline-cache folder instead of compiling the solver",
    )
    parser.add_argument("--verbose", action="store_true", help="say what is being compiled")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Compile (unless --cache), check, print one line per kernel; see the module docstring."""
    args = build_parser().parse_args(argv)
    missing = missing_tools()
    if missing:
        print(
            f"check_metal: {' and '.join(missing)} not found; install the Debian/Ubuntu "
            "packages spirv-tools and spirv-cross",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="metal-cache-") as fresh:
        folder = args.cache
        if folder is None:
            folder = Path(fresh)
            try:
                compile_kernels(folder, args.verbose)
            except BackendError as error:
                print(f"check_metal: Vulkan is needed to compile the kernels: {error}",
                      file=sys.stderr)  # fmt: skip
                return 2
        kernels, tasks, failed = check_cache(folder)
    if tasks == 0:
        print(f"check_metal: no SPIR-V modules found in {folder}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - started
    if failed:
        print(f"{failed} of {kernels} kernels ({tasks} SPIR-V modules) cannot run on Metal "
              f"({elapsed:.0f} s)")  # fmt: skip
        return 1
    print(f"all {kernels} kernels ({tasks} SPIR-V modules) pass the Metal check ({elapsed:.0f} s)")
    return 0
