"""`dambreak selftest [--backend B]`: the building blocks against numpy and a short dam break
against the CPU backend, on this machine, with PASS or FAIL and the figures for each item.

Exit status 0 when every item passes, 1 when one fails, 2 when the backend cannot start.
"""

import argparse
import platform
import sys
import time
import traceback

from solver.backend import BACKEND_CHOICES, BackendError, reset_taichi, start_backend
from solver.selftest.blocks import BLOCK_CHECKS
from solver.selftest.dambreak_check import case_config, compare_case, reference_for, run_case
from solver.selftest.result import CheckResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The selftest's options."""
    parser.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="auto",
        help="backend to test (default auto: cuda, else metal on macOS, else cpu)",
    )


def _report(result: CheckResult) -> None:
    verdict = "PASS" if result.passed else "FAIL"
    print(f"{verdict}  {result.name:<28} {result.figures}", flush=True)


def _guarded(name: str, check) -> CheckResult:
    """Run one check; an exception is a failure with its message, not the end of the test."""
    try:
        return check()
    except Exception as error:  # noqa: BLE001 - a crash on new hardware is a result to report
        traceback.print_exc(file=sys.stderr)
        return CheckResult(name, False, f"raised {type(error).__name__}: {error}")


def main(args: argparse.Namespace) -> int:
    """Run every item, print one line each, then the verdict; see the module docstring."""
    started = time.perf_counter()
    try:
        info = start_backend(args.backend)
    except BackendError as error:
        print(f"dambreak selftest: error: {error}", file=sys.stderr)
        return 2
    print(
        f"dambreak selftest on {info.name} ({info.device}); taichi {info.taichi_version}, "
        f"python {platform.python_version()}, {platform.platform()}",
        flush=True,
    )
    results = []
    for check in BLOCK_CHECKS:
        result = _guarded(check.__name__.removeprefix("check_"), check)
        _report(result)
        results.append(result)
    reset_taichi()
    cfg = case_config()
    reference_backend, reference_threads = reference_for(info.name)

    def dam_break() -> list[CheckResult]:
        test = run_case(cfg, info.name)
        reference = run_case(cfg, reference_backend, reference_threads)
        label = f"{reference_backend}" + (" (1 thread)" if reference_threads else "")
        print(
            f"dam break: quick case, dp {cfg.dp} m, {cfg.time.end} s: {test.steps} steps on "
            f"{test.backend}, {reference.steps} on {label}; {test.end.fluid_count} fluid "
            f"particles left",
            flush=True,
        )
        return compare_case(cfg, test, reference)

    try:
        case_results = dam_break()
    except Exception as error:  # noqa: BLE001 - report, as for the other items
        traceback.print_exc(file=sys.stderr)
        case_results = [CheckResult("dam break", False, f"raised {type(error).__name__}: {error}")]
    for result in case_results:
        _report(result)
    results.extend(case_results)
    failed = [r.name for r in results if not r.passed]
    elapsed = time.perf_counter() - started
    if failed:
        print(f"selftest FAILED on {info.name}: {', '.join(failed)} ({elapsed:.0f} s)")
        return 1
    print(f"selftest PASSED on {info.name}: {len(results)} items ({elapsed:.0f} s)")
    return 0
