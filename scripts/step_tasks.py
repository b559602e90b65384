"""Device time a step, task by task, from Nsight Compute's durations over a window of a run.

Usage, on the GPU machine (docs/performance.md, "Where a SPHERIC step's device time goes"):

    ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 40000 \
        --launch-count 1500 python -m solver.cli run configs/spheric_test2.toml --backend cuda \
        --set output.vtk=false --set time.end=1.0 --out /tmp/s --force > ncu.txt
    python3 scripts/step_tasks.py ncu.txt

Each offloaded task of a Taichi kernel is a CUDA kernel named <kernel>_c<N>_<M>_kernel_<task>_
<kind>; the durations are summed by kernel and task, and divided by the steps of the window (the
launches of the step's first task). Nsight Compute flushes the caches before each kernel,
so the figures are upper bounds.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

LAUNCH = re.compile(r"^\s+(\S+) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)")
DURATION = re.compile(r"gpu__time_duration\.sum\s+(ns|us|ms)\s+([\d.,]+)")
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
STEP_TASK = re.compile(r"^interact_and_verlet(_sps)?_kernel_0_")
"""The first task of the one-launch step (solver/fused_step.py), the batch's control: one per
step, whichever loops the step compiles (the interaction is task 2 under mDBC, 1 under DBC, and
a change to the loops before it renumbers it)."""


def task_durations(lines: list[str]) -> list[tuple[str, float]]:
    """(task, microseconds) of each profiled launch, the compile counter dropped from the
    name (interact_and_verlet_c112_0_kernel_2_range_for -> interact_and_verlet_kernel_2_...)."""
    launches = []
    task = None
    for line in lines:
        launch = LAUNCH.match(line)
        if launch:
            task = re.sub(r"_c\d+_\d+(?=_kernel_)", "", launch.group(1))
            continue
        duration = DURATION.search(line)
        if duration and task is not None:
            unit, value = duration.groups()
            launches.append((task, float(value.replace(",", "")) * TO_US[unit]))
            task = None
    return launches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ncu_output", type=Path, help="Nsight Compute's printed report")
    parser.add_argument("--rows", type=int, default=20, help="tasks listed (default 20)")
    args = parser.parse_args()
    launches = task_durations(args.ncu_output.read_text(errors="replace").splitlines())
    steps = sum(1 for task, _ in launches if STEP_TASK.match(task))
    if not steps:
        print(f"{args.ncu_output}: no step's first task among the launches", file=sys.stderr)
        return 1
    total: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for task, us in launches:
        total[task] += us
        count[task] += 1
    device = sum(total.values())
    print(f"{len(launches)} launches, {steps} steps: {device / steps:.1f} us of device time a step")
    print(f"{'us/step':>9} {'share':>6} {'launches':>8}  task")
    for task, us in sorted(total.items(), key=lambda item: -item[1])[: args.rows]:
        print(f"{us / steps:9.2f} {us / device:6.1%} {count[task]:8d}  {task}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
