"""Where a run's wall time goes on the host: the time loop's phases timed as they run.

Usage: python3 scripts/profile_host.py [CONFIG] [--backend B] [--end T] [--out DIR]
           [--set key=value ...]

Runs `dambreak run` on CONFIG (default: SPHERIC test 2) to simulated time T (default 1 s),
without VTK, with the simulation's batch methods, the sort, the probe read-back and the
observers wrapped in wall-clock timers, and prints each one's total seconds and calls. On a GPU
the launches are asynchronous: `_launch_step` is the host's preparation of the step launches,
`_count_batch` mostly the wait for the device to finish the batch, `record_deferred` the probe
readings of the batch before, made while a batch runs, and what the host spends outside them
(the sort, the probe rows' read-back in `take_sums`, the output times' `keep` and neighbour
count) is time the device has nothing queued. With
TI_KERNEL_PROFILER=1 in the environment Taichi also times every kernel task on the device and
the table of the 15 costliest follows (docs/performance.md, "Where a small case's step goes").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import taichi as ti  # noqa: E402

from solver.batch_sort import BatchSort  # noqa: E402
from solver.config import load_config  # noqa: E402
from solver.health import HealthCheck  # noqa: E402
from solver.neighbors import CellGrid  # noqa: E402
from solver.neighbour_count import NeighbourCounter  # noqa: E402
from solver.output.device_probes import DeviceProbes  # noqa: E402
from solver.output.observers import RunObservers  # noqa: E402
from solver.run import run_simulation  # noqa: E402
from solver.simulation import Simulation  # noqa: E402

TIMED = (
    (Simulation, "_step_batch"),
    (Simulation, "_launch_step"),
    (Simulation, "_count_batch"),
    (BatchSort, "__call__"),
    (Simulation, "_sort"),
    (CellGrid, "update"),
    (DeviceProbes, "take_sums"),
    (RunObservers, "record_deferred"),
    (RunObservers, "observe"),
    (RunObservers, "state"),
    (Simulation, "keep"),
    (NeighbourCounter, "__call__"),
    (HealthCheck, "check"),
)
"""(class, method) pairs timed, in the order printed."""


def phase_key(cls: type, name: str) -> str:
    """The row name of cls.name in the totals and the table: "Cls.name"."""
    return f"{cls.__name__}.{name}"


def time_calls(cls: type, name: str, totals: dict[str, list[float]]) -> None:
    """Wrap cls.name so that its calls add their wall time and count to its `phase_key` row."""
    method: Callable = getattr(cls, name)
    key = phase_key(cls, name)
    totals[key] = [0.0, 0]

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            totals[key][0] += time.perf_counter() - started
            totals[key][1] += 1

    setattr(cls, name, timed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs" / "spheric_test2.toml"))
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--end", type=float, default=1.0, help="simulated time [s]")
    parser.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    overrides = [f"time.end={args.end}", "output.vtk=false", *args.overrides]
    cfg = load_config(Path(args.config), overrides)
    totals: dict[str, list[float]] = {}
    for cls, name in TIMED:
        time_calls(cls, name, totals)
    out = Path(args.out) if args.out else Path("/tmp") / f"profile_host_{cfg.name}"
    started = time.perf_counter()
    summary = run_simulation(cfg, out, backend=args.backend, force=True, show_progress=False)
    wall = time.perf_counter() - started
    print(
        f"{cfg.name} on {summary['backend']} ({summary['device']}): {summary['steps']} steps, "
        f"{summary['sorts']} sorts to t = {summary['simulated_time']:.4g} s in {wall:.2f} s "
        f"(compile {summary['compile_time_s']:.2f} s), "
        f"{summary['particle_steps_per_second']:.3g} particle-steps/s"
    )
    print(f"{'phase':32} {'s':>8} {'calls':>7} {'ms/call':>8}")
    for cls, name in TIMED:
        key = phase_key(cls, name)
        seconds, calls = totals[key]
        print(f"{key:32} {seconds:8.3f} {calls:7d} {1e3 * seconds / max(calls, 1):8.3f}")
    if ti.lang.impl.current_cfg().kernel_profiler:
        ti.sync()
        ti.profiler.print_kernel_profiler_info("count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
