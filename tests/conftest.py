"""Shared test fixtures: run building-block tests on every backend this machine has.

The backends tried are cpu and vulkan, plus cuda where a CUDA driver is present and metal on
macOS; DAMBREAK_TEST_BACKENDS (comma-separated) overrides the list. A backend that cannot start
is skipped with its reason, except those named in DAMBREAK_REQUIRE_BACKENDS, which fail instead
(.ci/run requires vulkan, so CI never silently skips it). Likewise the tests that run ParaView
skip where it is not installed, except under DAMBREAK_REQUIRE_PARAVIEW=1 (set by .ci/run).
"""

from __future__ import annotations

import atexit
import ctypes.util
import os
import shutil
import sys
import tempfile

import pytest

from solver.backend import BackendError, reset_taichi, start_backend


def _candidate_backends() -> list[str]:
    listed = os.environ.get("DAMBREAK_TEST_BACKENDS")
    if listed:
        return [b.strip() for b in listed.split(",") if b.strip()]
    names = ["cpu", "vulkan"]
    if ctypes.util.find_library("cuda"):
        names.append("cuda")
    if sys.platform == "darwin":
        names.append("metal")
    return names


# Taichi's offline cache of compiled kernels: one private folder for this test session (and the
# processes it starts), never the user's, so that no other process writing it, or a test run
# killed while writing it, can hand this session a half-written entry.
if "TI_OFFLINE_CACHE_FILE_PATH" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="dambreak-ticache-")
    os.environ["TI_OFFLINE_CACHE_FILE_PATH"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

REQUIRED = {b.strip() for b in os.environ.get("DAMBREAK_REQUIRE_BACKENDS", "").split(",") if b}
_current: tuple[str, str, bool] | None = None


def use_backend(name: str, precision: str = "f32", fast_math: bool = True) -> None:
    """Start Taichi on `name` unless it already runs there so; skip or fail if it cannot.
    `fast_math` as in `solver.backend.start_backend`."""
    global _current
    if _current == (name, precision, fast_math):
        return
    reset_taichi()
    _current = None
    try:
        start_backend(name, precision, fast_math=fast_math)
    except BackendError as error:
        if name in REQUIRED:
            pytest.fail(f"required backend {name} cannot start: {error}")
        pytest.skip(f"backend {name} not available here: {error}")
    _current = (name, precision, fast_math)


@pytest.fixture(scope="session", params=_candidate_backends())
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a backend; tests using it run once per available backend."""
    return request.param


@pytest.fixture
def on_backend(backend: str) -> str:
    """Taichi started on `backend` (f32) for this test."""
    use_backend(backend)
    return backend


@pytest.fixture
def on_cpu() -> str:
    """Taichi started on the CPU backend (f32) for this test."""
    use_backend("cpu")
    return "cpu"


@pytest.fixture
def on_cpu_strict() -> str:
    """Taichi started on the CPU backend (f32) without fast math, every operation rounded as
    written: for tests that compare two kernels' bits, which fast math lets the compiler round
    differently on some CPUs (solver.backend.start_backend)."""
    use_backend("cpu", fast_math=False)
    return "cpu"


PARAVIEW_TOOLS = ("pvpython", "paraview", "Xvfb")
"""What the ParaView tests start: pvpython and the GUI, both on a virtual X display."""


@pytest.fixture(scope="session")
def paraview_tools() -> dict[str, str]:
    """The paths of PARAVIEW_TOOLS; skip without them, fail if DAMBREAK_REQUIRE_PARAVIEW=1."""
    tools = {name: shutil.which(name) or "" for name in PARAVIEW_TOOLS}
    missing = [name for name, path in tools.items() if not path]
    if missing:
        reason = (
            f"ParaView not installed here: no {', '.join(missing)} on PATH "
            "(Debian: apt-get install paraview python3-paraview xvfb)"
        )
        if os.environ.get("DAMBREAK_REQUIRE_PARAVIEW") == "1":
            pytest.fail(f"DAMBREAK_REQUIRE_PARAVIEW=1 but {reason}")
        pytest.skip(reason)
    return tools
