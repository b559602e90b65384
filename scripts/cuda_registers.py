"""The registers of the fused step's CUDA tasks, counted without a GPU.

Usage: python3 scripts/cuda_registers.py [CONFIG] [--ptxas PATH] [--keep DIR] [--set key=value]

A CUDA loop's registers set how many warps share a multiprocessor, and Taichi 1.7.4 caps them
by the loop's block size B (it declares `.maxntid B` and `.minnctapersm 2`: at most 65,536 /
(2 B) a thread; docs/performance.md, "Blocks of 512 as a register cap"). This script counts
them on any Linux machine with a C compiler: it builds scripts/fake_libcuda.c, a stand-in for
NVIDIA's driver library, starts Taichi's CUDA backend on it in a child process, builds CONFIG's
simulation (default: SPHERIC test 2) and launches one fused step (solver/fused_step.py), which
makes Taichi compile it to PTX as on a GPU machine, and hands that PTX to ptxas for sm_90 (an
H100 or H200). It prints, for each task of the fused step, the block size, the registers a
thread, the bytes spilled, and the warps a multiprocessor then holds (65,536 registers, 64 warps
and 32 blocks at most, registers taken in steps of 8 a thread). The counts are those of a real
GPU's PTX for the same code: the fake driver reports compute capability 9.0 and Taichi emits
sm_86 PTX either way.

ptxas: `--ptxas`, else $PTXAS, else `ptxas` on PATH; without a CUDA toolkit, NVIDIA's wheel has
it: `pip download --no-deps nvidia-cuda-nvcc-cu12 -d DIR`, unzip, nvidia/cuda_nvcc/bin/ptxas.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE_DRIVER = ROOT / "scripts" / "fake_libcuda.c"
REGISTERS_PER_SM, MAX_WARPS, MAX_BLOCKS = 65_536, 64, 32
"""An sm_90 multiprocessor's register file, and its most resident warps and blocks."""


def resident_warps(registers: int, block: int) -> int:
    """Warps a multiprocessor holds of a kernel taking `registers` a thread in blocks of
    `block` threads (registers are allocated a warp at a time, in steps of 8 a thread)."""
    warps_per_block = -(-block // 32)
    per_warp = -(-max(registers, 1) // 8) * 8 * 32
    blocks = min(REGISTERS_PER_SM // (per_warp * warps_per_block), MAX_BLOCKS)
    blocks = min(blocks, MAX_WARPS // warps_per_block)
    return blocks * warps_per_block


def compile_step(config: str, overrides: list[str]) -> None:
    """In the child process: start CUDA on the fake driver and launch one fused step."""
    sys.path.insert(0, str(ROOT))
    from solver.backend import start_backend
    from solver.config import load_config
    from solver.scene import build_scene
    from solver.simulation import Simulation

    cfg = load_config(Path(config), overrides)
    start_backend("cuda", cfg.physics.precision, None, source=cfg.source)
    sim = Simulation(cfg, build_scene(cfg))
    sim._launch_step(0, 0, cfg.time.end, (0.0, 1.0), False)


def task_table(ptx: str, ptxas: str) -> list[tuple[str, int, int, int, int]]:
    """(task, block size, registers, spill stores, spill loads) of each entry of `ptx`."""
    command = [ptxas, "-arch=sm_90", "-v", "-o", os.devnull, ptx]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    text = Path(ptx).read_text()
    rows, name, spills = [], None, (0, 0)
    for line in result.stderr.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            block = re.search(rf"\.entry {re.escape(name)}\(.*?\.maxntid (\d+)", text, re.S)
            rows.append((name, int(block.group(1)) if block else 0, int(m.group(1)), *spills))
            name, spills = None, (0, 0)
    return sorted(rows, key=lambda row: int(re.search(r"_kernel_(\d+)_", row[0]).group(1)))


def write_step_ptx(config: str, overrides: list[str], work: Path, compiler: str) -> Path:
    """Build the fake driver in `work`, compile CONFIG's fused step on it in a child process
    (Taichi's kernel cache in `work` too) and return the PTX module that holds the step."""
    driver = work / "lib"
    driver.mkdir(parents=True, exist_ok=True)
    library = driver / "libcuda.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(FAKE_DRIVER)],
                   check=True)  # fmt: skip
    (driver / "libcuda.so.1").unlink(missing_ok=True)
    (driver / "libcuda.so.1").symlink_to(library.name)
    ptx_dir = work / "ptx"
    ptx_dir.mkdir(exist_ok=True)
    library_path = f"{driver}:{os.environ.get('LD_LIBRARY_PATH', '')}"
    env = dict(os.environ, LD_LIBRARY_PATH=library_path, FAKECUDA_PTX_DIR=str(ptx_dir),
               TI_OFFLINE_CACHE_FILE_PATH=str(work / "cache"))  # fmt: skip
    child = [sys.executable, __file__, config, "--child"]
    child += [f"--set={override}" for override in overrides]
    subprocess.run(child, env=env, check=True, stdout=subprocess.DEVNULL)
    modules = [path for path in sorted(ptx_dir.glob("*.ptx")) if "interact_and_verlet" in
               path.read_text()]  # fmt: skip
    if not modules:
        raise RuntimeError(f"no PTX of the fused step was written into {ptx_dir}")
    return modules[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs" / "spheric_test2.toml"))
    parser.add_argument("--ptxas", default=os.environ.get("PTXAS") or shutil.which("ptxas"))
    parser.add_argument("--keep", default=None, help="work in DIR and keep it (PTX in DIR/ptx)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        compile_step(args.config, args.overrides)
        return 0
    if not args.ptxas:
        parser.error("no ptxas: give --ptxas PATH or set PTXAS (see the module's docstring)")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        parser.error("no C compiler (cc or gcc) to build scripts/fake_libcuda.c")

    with tempfile.TemporaryDirectory(prefix="cuda_registers-") as scratch:
        work = Path(args.keep) if args.keep else Path(scratch)
        ptx = write_step_ptx(args.config, args.overrides, work, compiler)
        print(f"{Path(args.config).name}: the fused step's tasks, ptxas for sm_90 ({args.ptxas})")
        print(f"{'task':48} {'block':>5} {'registers':>9} {'spilled (st/ld)':>15} {'warps/SM':>8}")
        for name, block, registers, stores, loads in task_table(str(ptx), args.ptxas):
            spilled = f"{stores}/{loads} B"
            warps = resident_warps(registers, block) if block > 1 else "-"
            print(f"{name:48} {block:5d} {registers:9d} {spilled:>15} {warps:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
