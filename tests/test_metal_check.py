"""The Metal check: the SPIR-V reader on hand-made modules, a planted f64 kernel caught, and
every kernel of the solver passing (scripts/check_metal.py as CI runs it).

The tests that compile kernels need Vulkan and the spirv-tools and spirv-cross packages; they
skip with the reason where these are missing, except in CI (.ci/run sets
DAMBREAK_REQUIRE_METAL_CHECK=1), where a missing tool is a failure.
"""

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import conftest
import numpy as np
import pytest
import taichi as ti

from solver.backend import BackendError, reset_taichi, start_backend
from solver.metal.check import check_cache, missing_tools
from solver.metal.spirv import MAGIC, decode_string, find_modules, inspect_module
from solver.metal.taichi_cache import read_cache

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("DAMBREAK_REQUIRE_METAL_CHECK") == "1"


# --- hand-made modules ----------------------------------------------------------------------


def _op(opcode: int, *operands: int) -> list[int]:
    return [(len(operands) + 1) << 16 | opcode, *operands]


def _string(text: str) -> list[int]:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


# ids: 1 void, 2 f32, 3 f64, 4 i32, 5 i64, 6 ptr StorageBuffer i32, 7 ptr StorageBuffer i64,
# 8 fn type, 9 main, 10 label, 11 const i32, 12 const f32, 20.. variables / values.
def _module(body: list[list[int]], extra_globals: list[list[int]] = ()) -> bytes:
    words = [MAGIC, 0x00010300, 0, 200, 0]
    for inst in [
        _op(17, 1),  # OpCapability Shader
        _op(17, 10),  # OpCapability Float64 (declared, as Taichi always does)
        _op(17, 11),  # OpCapability Int64
        _op(15, 5, 9, *_string("main")),  # OpEntryPoint GLCompute %9 "main"
        _op(5, 9, *_string("main")),  # OpName
        _op(19, 1),  # OpTypeVoid
        _op(22, 2, 32),
        _op(22, 3, 64),
        _op(21, 4, 32, 1),
        _op(21, 5, 64, 1),
        _op(32, 6, 12, 4),
        _op(32, 7, 12, 5),
        _op(33, 8, 1),  # OpTypeFunction
        _op(43, 4, 11, 1),  # OpConstant i32 1
        _op(43, 2, 12, 0x3F800000),  # OpConstant f32 1.0
        *extra_globals,
        _op(54, 1, 9, 0, 8),  # OpFunction
        _op(248, 10),  # OpLabel
        *body,
        _op(253),  # OpReturn
        _op(56),  # OpFunctionEnd
    ]:
        words.extend(inst)
    return struct.pack(f"<{len(words)}I", *words)


def test_clean_module_with_declared_f64_and_i64_has_no_problem():
    report = inspect_module(_module([_op(129, 2, 30, 12, 12)]))  # OpFAdd f32
    assert report.problems == []
    assert report.declares_int64
    assert report.entry_points == ["main"]
    assert report.version == (1, 3)


def test_f64_arithmetic_and_conversion_are_found():
    body = [_op(115, 3, 30, 12), _op(129, 3, 31, 30, 30), _op(115, 2, 32, 31)]  # FConvert, FAdd
    report = inspect_module(_module(body))
    assert report.float64_uses == ["opcode 115", "opcode 129"]
    assert "64-bit floats used" in report.problems[0]


def test_f64_inside_a_vector_type_is_found():
    vec = _op(23, 40, 3, 3)  # OpTypeVector f64 x3
    report = inspect_module(_module([_op(80, 40, 30, 12, 12, 12)], [vec]))  # CompositeConstruct
    assert report.float64_uses == ["opcode 80"]


def _buffer(variable: int, binding: int, pointer: int = 6) -> list[list[int]]:
    return [
        _op(71, variable, 34, 0),
        _op(71, variable, 33, binding),
        _op(59, pointer, variable, 12),
    ]


def test_64_bit_atomics_are_found_and_32_bit_ones_are_not():
    globals_ = _buffer(20, 0) + _buffer(21, 1, pointer=7)
    body32 = [_op(234, 4, 30, 20, 11, 0, 11)]  # OpAtomicIAdd i32
    assert inspect_module(_module(body32, globals_)).problems == []
    constant64 = _op(43, 5, 13, 1, 0)
    body64 = [_op(234, 5, 31, 21, 11, 0, 13), _op(228, 21, 11, 0, 13)]  # IAdd, Store on i64
    report = inspect_module(_module(body64, globals_ + [constant64]))
    assert report.atomics64 == ["OpAtomicIAdd", "OpAtomicStore"]
    assert report.buffer_bindings == [(0, 0), (0, 1)]


def test_more_than_31_buffers_fail():
    ok = [inst for b in range(31) for inst in _buffer(100 + b, b)]
    assert inspect_module(_module([], ok)).problems == []
    too_many = [inst for b in range(32) for inst in _buffer(100 + b, b)]
    problems = inspect_module(_module([], too_many)).problems
    assert any("32 buffer bindings" in p for p in problems)
    assert any("binding 31" in p for p in problems)


def test_subgroup_operations_and_builtins_are_found():
    body = [_op(349, 4, 30, 11, 0, 11)]  # OpGroupNonUniformIAdd Subgroup Reduce
    assert inspect_module(_module(body)).subgroup_uses == ["OpGroupNonUniformIAdd"]
    builtin = [_op(71, 20, 11, 36), _op(32, 41, 1, 4), _op(59, 41, 20, 1)]  # SubgroupSize
    report = inspect_module(_module([_op(61, 4, 30, 20)], builtin))
    assert report.subgroup_uses == ["SubgroupSize"]
    assert "subgroup-size dependent" in report.problems[0]


def test_modules_are_found_inside_a_packed_file_with_counts_and_trailing_bytes():
    first, second = _module([]), _module([_op(129, 2, 30, 12, 12)])
    packed = b"TIC\0junk" + struct.pack("<Q", len(first) // 4) + first
    packed += struct.pack("<Q", len(second) // 4) + second + bytes(range(64))
    assert find_modules(packed) == [first, second]
    # Without the counts, the walk stops at the data's end.
    assert find_modules(b"xyz" + second) == [second]


def test_strings_decode():
    assert decode_string(tuple(_string("main"))) == "main"
    assert decode_string(tuple(_string("abcd"))) == "abcd"


# --- kernels compiled by Taichi -------------------------------------------------------------


def _need(condition: bool, reason: str) -> None:
    if condition:
        return
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


@ti.kernel
def planted_f64(values: ti.types.ndarray(dtype=ti.f32, ndim=1), n: ti.i32):
    for i in range(n):
        total = ti.cast(0.0, ti.f64)
        for j in range(n):
            total += ti.cast(values[j], ti.f64) * ti.cast(values[i], ti.f64)
        values[i] = ti.cast(total / n, ti.f32)


@ti.kernel
def clean_f32(values: ti.types.ndarray(dtype=ti.f32, ndim=1), n: ti.i32):
    for i in range(n):
        values[i] = values[i] * 2.0 + 1.0


def test_planted_f64_kernel_is_caught_and_clean_kernel_passes(tmp_path):
    _need(not missing_tools(), f"{', '.join(missing_tools())} not installed")
    reset_taichi()
    conftest._current = None  # Taichi restarted here, behind conftest's back
    try:
        start_backend("vulkan", offline_cache_dir=tmp_path)
    except BackendError as error:
        _need(False, f"Vulkan not available: {error}")
    try:
        values = ti.ndarray(ti.f32, shape=64)
        values.from_numpy(np.linspace(0, 1, 64, dtype=np.float32))
        planted_f64(values, 64)
        clean_f32(values, 64)
    finally:
        reset_taichi()
    kernels = {task.kernel for task in read_cache(tmp_path)}
    assert any(k.startswith("planted_f64") for k in kernels)
    out = io.StringIO()
    total, _, failed = check_cache(tmp_path, out)
    lines = out.getvalue().splitlines()
    planted = [line for line in lines if "planted_f64" in line and "task" in line]
    clean = [line for line in lines if "clean_f32" in line]
    assert planted[0].startswith("FAIL")
    assert any("64-bit floats used" in line for line in lines)
    assert clean[0].startswith("PASS")
    assert failed == 1 and total == len(kernels)


def test_every_kernel_of_the_solver_passes_the_metal_check():
    _need(not missing_tools(), f"{', '.join(missing_tools())} not installed")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_metal.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if result.returncode == 2 and "Vulkan" in result.stderr:
        _need(False, result.stderr.strip())
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line[:4] in ("PASS", "FAIL")]
    assert lines and all(line.startswith("PASS") for line in lines)
    names = " ".join(line.split()[1] for line in lines)
    for kernel in ("interact", "verlet", "predict", "correct", "cell_count", "_reorder",
                   "bucket_sort", "exclusive_scan", "_fold_chunks", "gather"):  # fmt: skip
        assert kernel in names
    # Every smoothing kernel x diffusion pair compiles its own interaction (6); the three pairs
    # run with Verlet also compile the one-launch Verlet step. The laminar + SPS viscosity
    # compiles its own interaction with each integrator (2), and its Verlet step (1).
    assert sum(" interact_c" in line for line in lines) == 6
    assert sum(" interact_and_verlet_c" in line for line in lines) == 3
    assert sum(" interact_sps_c" in line for line in lines) == 2
    assert sum(" interact_and_verlet_sps_c" in line for line in lines) == 1
    # The decomposed solver's step (solver/distributed/), once with each viscosity.
    assert sum(" phase_interact_c" in line for line in lines) == 1
    assert sum(" phase_interact_sps_c" in line for line in lines) == 1
    for kernel in ("phase_update", "phase_finish", "_pack", "_unpack", "cell_keys", "scatter"):
        assert kernel in names
    assert "pass the Metal check" in result.stdout
