"""Choosing and starting a Taichi backend, and what each backend can do.

Taichi 1.7.4 falls back to the CPU silently when the asked-for GPU backend is missing (see
../shared/reference/taichi-notes.md), so `start_backend` checks the architecture actually
running after `ti.init` and stops with a clear message when it is not the one asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import io
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import taichi as ti

from solver.taichi_front_end import memoise_front_end

BACKEND_CHOICES = ("cpu", "cuda", "vulkan", "metal", "auto")


class BackendError(RuntimeError):
    """The asked-for backend cannot run here, or cannot run what the config asks for."""


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend can do, checked before anything runs."""

    name: str
    precisions: tuple[str, ...]
    threads_option: bool
    note: str


CAPABILITIES: dict[str, BackendCapabilities] = {
    "cpu": BackendCapabilities("cpu", ("f32", "f64"), True, "Taichi x64/arm64 backend"),
    # f64 on CUDA fails at the first launch of the cell-grid kernel with Taichi 1.7.4
    # (CUDA_ERROR_MISALIGNED_ADDRESS, H200, 2026-12-02; smaller kernels with the same argument
    # types run): refused until that is found, the CPU's f64 being the reference anyway.
    "cuda": BackendCapabilities(
        "cuda",
        ("f32",),
        False,
        "NVIDIA GPUs; f64 fails there in Taichi 1.7.4 with a misaligned address in the cell-grid "
        "kernel",
    ),
    "vulkan": BackendCapabilities(
        "vulkan", ("f32",), False, "SPIR-V codegen shared with Metal; f32 only to match Metal"
    ),
    "metal": BackendCapabilities("metal", ("f32",), False, "Apple GPUs: no f64, no 64-bit atomics"),
}

_ARCHS = {"cpu": ti.cpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "metal": ti.metal}


@dataclass(frozen=True)
class BackendInfo:
    """The backend really running, as reported to the user and written to summary.json."""

    name: str
    device: str
    precision: str
    threads: int | None
    taichi_version: str


def check_capabilities(
    backend: str, precision: str, threads: int | None = None, source: str = "the config"
) -> None:
    """Raise BackendError if `backend` cannot run with `precision` or the `threads` option.

    `source` names the case file the precision comes from, for the message.
    """
    if backend not in CAPABILITIES:
        allowed = ", ".join(BACKEND_CHOICES)
        raise BackendError(f"unknown backend {backend!r}; allowed: {allowed}")
    caps = CAPABILITIES[backend]
    if precision not in caps.precisions:
        able = ", ".join(b for b, c in CAPABILITIES.items() if precision in c.precisions)
        allowed = " or ".join(f'"{p}"' for p in caps.precisions)
        raise BackendError(
            f'{source}: physics.precision = "{precision}" is not allowed on backend {backend} '
            f"({caps.note}); allowed there: {allowed}. Set physics.precision = {allowed} "
            f"(e.g. --set physics.precision={caps.precisions[0]}) or run on {able}"
        )
    if threads is not None and not caps.threads_option:
        raise BackendError(f"--threads applies to the cpu backend only, not to {backend}")
    if threads is not None and threads < 1:
        raise BackendError(f"--threads must be >= 1, got {threads}")


def running_arch() -> str:
    """The backend Taichi is really running on, in this module's names (x64/arm64 -> cpu)."""
    arch = ti.lang.impl.current_cfg().arch.name
    return "cpu" if arch in ("x64", "arm64") else arch


def _init(
    backend: str,
    precision: str,
    threads: int | None,
    offline_cache_dir: Path | None = None,
    log_level: str = ti.WARN,
    fast_math: bool = True,
) -> None:
    """ti.init for `backend`; precision sets Taichi's default float for all kernels.

    `offline_cache_dir` points Taichi's offline cache at a folder of the caller's (the Metal
    check reads the compiled kernels back from a fresh one); `log_level` is Taichi's;
    `fast_math` is Taichi's switch of the same name (see `start_backend`).
    """
    kwargs: dict[str, object] = {
        "arch": _ARCHS[backend],
        "default_fp": ti.f64 if precision == "f64" else ti.f32,
        "default_ip": ti.i32,
        "log_level": log_level,
        "fast_math": fast_math,
    }
    if backend == "cpu" and threads is not None:
        kwargs["cpu_max_num_threads"] = threads
    if offline_cache_dir is not None:
        kwargs["offline_cache"] = True
        kwargs["offline_cache_file_path"] = str(offline_cache_dir)
    memoise_front_end()  # every kernel prepared from here on costs less Python time
    gc.collect()  # ti.init resets the running program: see reset_taichi
    with _banner_output():
        ti.init(**kwargs)  # prints "[Taichi] Starting on arch=...", whatever its log_level


def _banner_output() -> contextlib.AbstractContextManager[object]:
    """Where ti.init's start-up line goes: stdout if Taichi's own switch for its version line,
    ENABLE_TAICHI_HEADER_PRINT, lets that through (its default; `dambreak` sets it from
    --verbose), else nowhere, so that one switch governs both lines."""
    if os.environ.get("ENABLE_TAICHI_HEADER_PRINT", "True").lower() in ("false", "0", "f"):
        return contextlib.redirect_stdout(io.StringIO())
    return contextlib.nullcontext()


def reset_taichi() -> None:
    """ti.reset(), after collecting Python's garbage.

    Taichi frees an ndarray when its Python object dies, looking it up by address in the
    program running at that moment. An ndarray of the program about to be reset that only a
    reference cycle still holds (a traceback kept by a caught exception, say) would otherwise
    die later, under the next program, and could free a live array that happens to reuse its
    address. Collecting first lets it die while its own program still runs.
    """
    gc.collect()
    ti.reset()


def _auto_backend() -> str:
    """CUDA if it really starts, else Metal on macOS, else the CPU; never a software Vulkan."""
    candidates = ["cuda"] + (["metal"] if sys.platform == "darwin" else [])
    for name in candidates:
        _init(name, "f32", None, log_level=ti.ERROR)  # a missing GPU is an answer, not a warning
        if running_arch() == name:
            reset_taichi()
            return name
        reset_taichi()
    return "cpu"


def resolve_backend(requested: str) -> str:
    """The concrete backend for `requested`, resolving "auto" by probing the machine."""
    if requested == "auto":
        return _auto_backend()
    if requested not in CAPABILITIES:
        raise BackendError(f"unknown backend {requested!r}; allowed: {', '.join(BACKEND_CHOICES)}")
    return requested


def start_backend(
    requested: str,
    precision: str = "f32",
    threads: int | None = None,
    offline_cache_dir: Path | None = None,
    source: str = "the config",
    fast_math: bool = True,
) -> BackendInfo:
    """Start Taichi on the requested backend and verify it is the one really running.

    `threads` caps the CPU backend's thread pool (1 is the sequential reference);
    `offline_cache_dir` replaces Taichi's default offline-cache folder; `source` names the
    case file in messages.

    `fast_math` (Taichi's default, and every run's) lets the compiler fuse a multiply and an
    add into one rounding and reassociate sums. Where it does so depends on the loop around
    them and on the CPU it compiles for, so two kernels that add the same terms in the same
    order (the neighbour lists and the cell walk, the pair halves' maximum and the gather's)
    round alike on one CPU and differ in the last bit on another (measured: bitwise on the
    machines of the earlier sessions and CI runs, not on an AMD EPYC with AVX2 and FMA,
    2026-12-08). Without it every operation is rounded as written (LLVM's strict floating
    point), which makes that property hold on any CPU; the tests that compare two kernels'
    bits start Taichi so. Runs keep it on: the CPU steps SPHERIC test 2 7 to 9 % slower
    without it (the 2-core machine, `--set time.end=0.01`: 8.6e5 and 9.3e5 against 9.5e5 and
    1.0e6 particle-steps/s; docs/performance.md, "Fast math kept on").
    """
    backend = resolve_backend(requested)
    check_capabilities(backend, precision, threads, source)
    _init(backend, precision, threads, offline_cache_dir, fast_math=fast_math)
    running = running_arch()
    if running != backend:
        reset_taichi()
        raise BackendError(
            f"backend {backend} was asked for but Taichi started {running} instead "
            f"(no usable {backend} device or driver on this machine); "
            f"choose another with --backend ({', '.join(BACKEND_CHOICES)})"
        )
    return BackendInfo(
        name=backend,
        device=describe_device(backend, threads),
        precision=precision,
        threads=threads if backend == "cpu" else None,
        taichi_version=ti.__version__
        if isinstance(ti.__version__, str)
        else ".".join(str(v) for v in ti.__version__),
    )


def describe_device(backend: str, threads: int | None = None) -> str:
    """A human description of the device behind `backend`."""
    if backend == "cpu":
        cores = os.cpu_count() or 1
        used = threads if threads is not None else cores
        return f"{platform.processor() or platform.machine()} CPU, {used} of {cores} threads"
    if backend == "cuda":
        return _cuda_device_name() or "CUDA device 0"
    if backend == "vulkan":
        devices = vulkan_devices()
        if not devices:
            return "Vulkan device (name not available)"
        return "; ".join(f"{name} [{kind}]" for name, kind in devices)
    return "Apple GPU (Metal)"


def load_libcuda() -> ctypes.CDLL | None:
    """The CUDA driver library through ctypes, or None where there is none."""
    lib = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        return ctypes.CDLL(lib)
    except OSError:
        return None


def _cuda_device_name() -> str | None:
    """Name of CUDA device 0 through the driver API (Taichi always uses device 0)."""
    cuda = load_libcuda()
    if cuda is None:
        return None
    device = ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    if cuda.cuDeviceGetName(name, 256, device) != 0:
        return None
    return name.value.decode(errors="replace")


_VK_DEVICE_TYPES = {
    0: "other",
    1: "integrated GPU",
    2: "discrete GPU",
    3: "virtual GPU",
    4: "software",
}


def vulkan_devices() -> list[tuple[str, str]]:
    """(name, type) of every Vulkan physical device, read through the loader with ctypes.

    The type is "software" for CPU implementations such as Mesa's lavapipe.
    """
    lib = ctypes.util.find_library("vulkan") or "libvulkan.so.1"
    try:
        vk = ctypes.CDLL(lib)
    except OSError:
        return []

    class InstanceCreateInfo(ctypes.Structure):
        _fields_ = [
            ("sType", ctypes.c_int),
            ("pNext", ctypes.c_void_p),
            ("flags", ctypes.c_uint32),
            ("pApplicationInfo", ctypes.c_void_p),
            ("enabledLayerCount", ctypes.c_uint32),
            ("ppEnabledLayerNames", ctypes.c_void_p),
            ("enabledExtensionCount", ctypes.c_uint32),
            ("ppEnabledExtensionNames", ctypes.c_void_p),
        ]

    class PhysicalDeviceProperties(ctypes.Structure):
        _fields_ = [
            ("apiVersion", ctypes.c_uint32),
            ("driverVersion", ctypes.c_uint32),
            ("vendorID", ctypes.c_uint32),
            ("deviceID", ctypes.c_uint32),
            ("deviceType", ctypes.c_int),
            ("deviceName", ctypes.c_char * 256),
            ("rest", ctypes.c_ubyte * 1024),
        ]

    info = InstanceCreateInfo(sType=1)
    instance = ctypes.c_void_p()
    if vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        return []
    try:
        count = ctypes.c_uint32(0)
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        devices = []
        for handle in handles:
            props = PhysicalDeviceProperties()
            vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), ctypes.byref(props))
            kind = _VK_DEVICE_TYPES.get(props.deviceType, "other")
            devices.append((props.deviceName.decode(errors="replace"), kind))
        return devices
    finally:
        vk.vkDestroyInstance(instance, None)
