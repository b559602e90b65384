"""scripts/step_tasks.py: Nsight Compute's printed durations summed by task and step."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "step_tasks.py"

# Two steps of Nsight Compute's report (its --metrics layout), with a sort task between them;
# durations in three units, one with a thousands separator.
REPORT = """\
==PROF== Profiling "interact_and_verlet_c112_0_kernel_0_serial": 0%....50%....100% - 1 pass
  interact_and_verlet_c112_0_kernel_0_serial (1, 1, 1)x(1, 1, 1), Context 1, Stream 7, Device 0
    Metric Name                                                 Metric Unit Metric Value
    gpu__time_duration.sum                                               ns     4,000.00
  interact_and_verlet_c112_0_kernel_2_range_for (8448, 1, 1)x(128, 1, 1), Context 1, Stream 7
    gpu__time_duration.sum                                               us       440.00
  update_when_c90_0_kernel_9_range_for (8448, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0
    gpu__time_duration.sum                                               ms         0.20
  interact_and_verlet_c112_1_kernel_0_serial (1, 1, 1)x(1, 1, 1), Context 1, Stream 7, Device 0
    gpu__time_duration.sum                                               us         4.00
  interact_and_verlet_c112_1_kernel_2_range_for (8448, 1, 1)x(128, 1, 1), Context 1, Stream 7
    gpu__time_duration.sum                                               us       460.00
"""


def test_durations_are_summed_by_task_and_divided_by_the_steps(tmp_path):
    report = tmp_path / "ncu.txt"
    report.write_text(REPORT)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(report)], capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "5 launches, 2 steps: 554.0 us of device time a step"
    rows = {line.split()[-1]: line.split()[:3] for line in lines[2:]}
    assert rows["interact_and_verlet_kernel_2_range_for"] == ["450.00", "81.2%", "2"]
    assert rows["update_when_kernel_9_range_for"] == ["100.00", "18.1%", "1"]
    assert rows["interact_and_verlet_kernel_0_serial"] == ["4.00", "0.7%", "2"]


def test_a_report_without_steps_is_an_error(tmp_path):
    report = tmp_path / "ncu.txt"
    report.write_text(REPORT.split("  interact_and_verlet_c112_0_kernel_0")[0])
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(report)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "no step's first task" in result.stderr
