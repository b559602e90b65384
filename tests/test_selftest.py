"""`dambreak selftest`: passes on this machine's CPU and Vulkan, reports every item with its
figures, and says FAIL (exit 1) when a quantity leaves its tolerance."""

import subprocess
import sys
from pathlib import Path

import conftest
import pytest

from solver.selftest.dambreak_check import CaseRun, case_config, compare_case
from solver.validation.metrics import FluidMetrics

ROOT = Path(__file__).resolve().parents[1]
ITEMS = ("scan", "sort", "gather", "reductions", "neighbours", "dam break: kinetic energy",
         "dam break: potential energy", "dam break: centre of mass", "dam break: front",
         "dam break: mass")  # fmt: skip


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_selftest_passes_every_item(backend):
    result = subprocess.run(
        [sys.executable, "-m", "solver.cli", "selftest", "--backend", backend],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if result.returncode == 2 and backend not in conftest.REQUIRED and backend != "cpu":
        pytest.skip(f"backend {backend} not available here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for item in ITEMS:
        assert any(line.startswith("PASS") and f"  {item} " in line for line in lines), item
    assert f"selftest PASSED on {backend}" in lines[-1]


def _metrics(kinetic: float, com_x: float, mass: float = 72.0) -> FluidMetrics:
    return FluidMetrics(0.15, 576, mass, kinetic, 100.0, (com_x, 0.3, 0.15), 0.5)


def test_dam_break_items_fail_outside_their_tolerances():
    cfg = case_config()
    start = _metrics(0.0, 0.2)
    reference = CaseRun("cpu", "cpu", start, _metrics(8.0, 0.25), 300)
    close = CaseRun("metal", "gpu", start, _metrics(8.5, 0.25 + 0.5 * cfg.dp), 300)
    far = CaseRun("metal", "gpu", start, _metrics(11.0, 0.25 + 3 * cfg.dp, mass=60.0), 300)
    assert all(r.passed for r in compare_case(cfg, close, reference))
    failed = {r.name for r in compare_case(cfg, far, reference) if not r.passed}
    assert failed == {"dam break: kinetic energy", "dam break: centre of mass", "dam break: mass"}
