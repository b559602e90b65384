"""scripts/cuda_registers.py: the fused step compiled for CUDA on a stand-in driver, no GPU.

The PTX it writes is what Taichi hands a real GPU's driver, so these tests also hold the
interaction's CUDA block size where solver/physics/interaction.py (`interaction_block_dim`)
puts it, which no other test on a machine without a GPU reaches.
"""

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cuda_registers.py"
SPEC = importlib.util.spec_from_file_location("cuda_registers", SCRIPT)
cuda_registers = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cuda_registers)

COMPILER = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.parametrize(
    ("registers", "block", "warps"),
    [(94, 128, 20), (81, 128, 20), (80, 128, 24), (72, 128, 28), (64, 128, 32), (64, 512, 32),
     (72, 512, 16), (54, 128, 36), (32, 128, 64), (20, 1, 32)],
)  # fmt: skip
def test_resident_warps_follow_the_register_file(registers: int, block: int, warps: int) -> None:
    assert cuda_registers.resident_warps(registers, block) == warps


def interaction_block(ptx: Path) -> int:
    """The .maxntid of the fused step's interaction task in `ptx`: its second loop, after the
    mDBC pass (both cases here are mDBC's)."""
    loops = re.findall(
        r"\.entry interact_and_verlet_\w+?_kernel_(\d+)_range_for\(.*?\.maxntid (\d+)",
        ptx.read_text(), re.S,
    )  # fmt: skip
    assert len(loops) >= 2, "no interaction task in the PTX"
    return int(sorted(loops, key=lambda loop: int(loop[0]))[1][1])


@pytest.mark.skipif(sys.platform != "linux", reason="Taichi's CUDA backend loads libcuda.so: Linux")
@pytest.mark.parametrize(
    ("config", "block"),
    [("dambreak.toml", 512), ("spheric_test2.toml", 128)],
)
def test_the_interaction_takes_its_block_size_in_the_cuda_code(
    tmp_path: Path, config: str, block: int
) -> None:
    """The seed case (128,310 fluid particles) runs the interaction in blocks of 512, SPHERIC
    (85,400) in Taichi's 128; with --set the seed case below the threshold takes 128 too."""
    assert COMPILER, "no C compiler (cc or gcc) to build scripts/fake_libcuda.c"
    ptx = cuda_registers.write_step_ptx(str(ROOT / "configs" / config), [], tmp_path, COMPILER)
    assert ".target sm_" in ptx.read_text()
    assert interaction_block(ptx) == block
    if config == "dambreak.toml":
        coarse = cuda_registers.write_step_ptx(
            str(ROOT / "configs" / config), ["particles.dp=0.02"], tmp_path / "coarse", COMPILER
        )
        assert interaction_block(coarse) == 128
