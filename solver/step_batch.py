"""A batch of Verlet steps launched back to back, the device deciding where the batch stops.

At the seed case's size a step's kernel runs on the H200 for about as long as the host takes to
prepare its launch, and a step that hands its time step back to the host (a kernel return
value, a `to_numpy`) makes the host wait for the device and the device wait for the next
launch: the two add up instead of overlapping. Taichi's CUDA launches are asynchronous as long
as nothing is read back (taichi/runtime/cuda/kernel_launcher.cpp in 1.7: ndarray arguments
need no copy, so nothing synchronises the stream; a kernel's return value is what the Python
side waits for), so the host launches K step kernels in a row, none returning a value, and
reads back one small array at the end.

The host cannot know in advance where the batch has to stop: at the batch's target time (an
output time), when a neighbour sort is due (the skin bound `moved` exceeds skin * 2H, see
Simulation._sort_if_needed) and the host has not queued the batch's own sort after that step
(solver/batch_sort.py), or where particles flagged for removal wait for the host's sort, or
when the run's health needs the host (a non-finite value, the time step at its floor;
solver/health.py). The device knows after each step, so it keeps the
batch's bookkeeping in the batch array and, once a step stops the batch, raises its HALTED
flag: every later kernel of the batch reads the flag and runs its particle loops over zero
particles, so it changes nothing. The loop bound is read from the array on the device
(`live_count`): Taichi 1.7.4 evaluates such a bound in a serial task before the loop, as it
does a bound passed as an argument, on CPU, CUDA and SPIR-V alike (tests/test_step_batch.py
shows on the CPU and on Vulkan that the later kernels change nothing). The host reads how many
steps were taken and sorts when the last one said so.

What is bitwise: a step computes what the one-launch step computed before batches, and within
one target time the result does not depend on how the steps are split into batches (the time
left goes on from batch to batch), so runs, checkpoints and resumes are bitwise per backend.
What is not: the time left is counted down in the device's float type from the host's value
at the target's start, where single steps each took the limit afresh from the host's f64
time, so the step that lands on a target may differ from theirs by the float rounding of that
count; and the skin bound `moved` is summed in the device's float type (it was f64 on the
host), which can move a sort by a step where the bound is crossed within rounding.

Probes are sampled inside the batch (solver/output/device_probes.py): a step that reaches a
probe time does not stop the batch, it gathers the probes' sums into the next row of the
simulation's probe rows, and the host reads them with the records. The batch does not shorten
a step to land on a probe time, as DualSPHysics' gauges do not: a probe is sampled at the end
of the first step at or after its time, and the run's trajectory does not depend on how often
it is observed (before, each probe time cut a step short: with probes every 1 ms, 6 % more
steps on SPHERIC test 2). The device decides with the same countdown as the landing: the next
probe time lies LAST_PROBE + PROBES_LEFT * interval before the target, where LAST_PROBE is how
long before the target its last probe time lies (the host's f64 difference, 0 when a probe
time is the target) and PROBES_LEFT the probe times after the next up to that one (-1: the
next lies beyond the target). A step passes it when the time left to the target drops to that
or below; since no error accumulates in LAST_PROBE, a probe time on the target is passed by
the step that lands there (the time left then 0 exactly).

The batch array holds MAX_STEPS + 1 rows of COLUMNS floats (the solver's precision):

- row 0, the control: REMAINING time to the target (set by the host when it names a new target,
  then decreased by each step's dt on the device), DT_PREV (the step before, for the Verlet
  span), MOVED (the skin bound since the last sort), HALTED, TAKEN (steps taken so far),
  LAST_PROBE and PROBES_LEFT (see above; LAST_PROBE is NO_PROBE without probes), PROBES (probe
  rows filled so far), PENDING (particles flagged for removal since the last sort, which
  leave that sort to the host) and a SPARE column (solver/distributed/step_phases.py keeps dt
  there);
- row 1 + k, the record of step k of the batch: its DT, A_MAX and V_MAX (the maxima of its
  interaction), the counts of NONFINITE particles and of particles FLAGGED for removal, its
  EVENTS (LANDED, SORT_DUE, AT_FLOOR, NONFINITE_STATE, PROBE_ROWS_FULL: why it stopped the
  batch), PROBE_TIMES, how many probe times it passed (0 or 1 unless a step is longer than
  the probe interval; a step that passes several is sampled once, at its end), and SORTED, 1
  when the batch's sort ran after it.

The control row is rewritten by the first kernel of each batch from the host's copies of
dt_prev, moved, the remaining time, the probe clock (LAST_PROBE, PROBES_LEFT) and the pending
removals, which the host takes from the row read back (or, for the removals, counts itself):
the array carries nothing from one batch to the next, so a checkpoint needs only those host
scalars. Counts are held as floats: exact up to 2^24 particles.
"""

from collections.abc import Callable
from typing import NamedTuple

import taichi as ti

from solver.integrate import at_time_step_floor, displacement_bound, lands_on_limit
from solver.physics.shared_formula import taichi_func

MAX_STEPS = 64
"""Most steps one batch launches (the rows of the batch array)."""
NO_PROBE = -1.0e30
"""LAST_PROBE when there is no probe time to pass (finite: fast math may assume no inf)."""
PROBE_ROWS = MAX_STEPS
"""Most probe samples one batch holds; the step that fills the last row stops the batch (one
row a step: only a probe interval shorter than the time step fills them before the batch's
last step)."""
COLUMNS = 10
(REMAINING, DT_PREV, MOVED, HALTED, TAKEN, LAST_PROBE, PROBES_LEFT, PROBES, PENDING,
 SPARE) = range(COLUMNS)  # fmt: skip
"""Columns of the control row (row 0)."""
DT, A_MAX, V_MAX, NONFINITE, FLAGGED, EVENTS, PROBE_TIMES, SORTED = range(8)
"""Columns of a step's record (row 1 + k)."""
LANDED, SORT_DUE, AT_FLOOR, NONFINITE_STATE, PROBE_ROWS_FULL = 1, 2, 4, 8, 16
"""Bits of EVENTS; a step with any of them stops the batch."""

_lands = taichi_func(lands_on_limit)
_at_floor = taichi_func(at_time_step_floor)
_displacement = taichi_func(displacement_bound)


def allocate_batch(dtype) -> ti.Ndarray:
    """A batch array of the solver's float type `dtype`."""
    return ti.Vector.ndarray(COLUMNS, dtype, shape=MAX_STEPS + 1)


def batch_nbytes(real_bytes: int) -> int:
    """Device bytes of a batch array."""
    return (MAX_STEPS + 1) * COLUMNS * real_bytes


class BatchControl(NamedTuple):
    """The Taichi functions a step kernel calls to take part in a batch (see the module)."""

    begin: Callable
    """ti.func (batch, k, remaining, dt_prev, moved, last_probe, probes_left, pending): the
    first kernel (k = 0) writes the control row; the others leave it as the step before left
    it."""
    live_count: Callable
    """ti.func (batch, n) -> n, or 0 once the batch has halted: the particle loops' bound."""
    running: Callable
    """ti.func (batch) -> whether this kernel takes its step (the batch has not halted)."""
    finish: Callable
    """ti.func (batch, k, dt, maxima row, health, sort_follows): record step k and decide
    whether it stops the batch (`sort_follows`: whether the host queued the batch's sort
    after it, which then takes a sort that falls due instead)."""
    probe_row: Callable
    """ti.func (batch, k) -> the probe row step k fills, or -1: none (the step passed no probe
    time, or was not taken)."""
    sort_due: Callable
    """ti.func (batch) -> whether the batch's sort queued after a step sorts: the step was
    taken and used up the skin (solver/batch_sort.py)."""
    mark_sorted: Callable
    """ti.func (batch): after the batch's sort, record it in the last step's record and start
    the skin bound afresh."""


def build_batch_control(
    dt_min: float, skin_bound: float, probe_interval: float | None = None
) -> BatchControl:
    """The batch functions of a case: `dt_min` is time.dt_min, `skin_bound` the distance the
    particles may move between sorts (skin * 2H, as the host rounds it to the device's float
    type, so that host and device agree on when a sort is due), `probe_interval` the time
    between probe samples (None: the case has no probes)."""
    interval = probe_interval if probe_interval is not None else 1.0  # unused under NO_PROBE

    @ti.func
    def begin(batch: ti.template(), k, remaining, dt_prev, moved, last_probe, probes_left, pending):
        if k == 0:
            batch[0] = ti.Vector(
                [remaining, dt_prev, moved, 0.0, 0.0, last_probe, probes_left, 0.0, pending,
                 0.0]
            )  # fmt: skip

    @ti.func
    def running(batch: ti.template()) -> bool:
        return batch[0][HALTED] == 0.0

    @ti.func
    def live_count(batch: ti.template(), n):
        return ti.select(running(batch), n, 0)

    @ti.func
    def finish(batch: ti.template(), k, dt, maxima_row, health: ti.template(), sort_follows):
        control = batch[0]
        remaining = control[REMAINING]
        moved = control[MOVED] + _displacement(dt, maxima_row[1], maxima_row[0])
        events = 0
        if _lands(dt, remaining):
            events |= LANDED
        # Probe times passed: those at or before the step's end, where the time left to the
        # target is remaining - dt (see the module).
        probes_left = control[PROBES_LEFT]
        ahead = control[LAST_PROBE] + probes_left * interval
        passed = 0
        if remaining - dt <= ahead:
            passed = ti.cast(ti.floor((ahead - (remaining - dt)) / interval), int) + 1
            probes_left = ti.max(probes_left - passed, -1.0)
        probes = control[PROBES] + ti.select(passed > 0, 1.0, 0.0)
        if probes >= PROBE_ROWS:
            events |= PROBE_ROWS_FULL
        # Flagged particles wait for the host's sort, which logs them (solver/removal_log.py).
        pending = control[PENDING] + ti.cast(health[1], float)
        if moved > skin_bound and (sort_follows == 0 or pending != 0.0):
            events |= SORT_DUE
        if _at_floor(dt, remaining, dt_min):
            events |= AT_FLOOR
        if health[0] != 0:
            events |= NONFINITE_STATE
        batch[k + 1] = ti.Vector(
            [dt, maxima_row[0], maxima_row[1], ti.cast(health[0], float),
             ti.cast(health[1], float), ti.cast(events, float), ti.cast(passed, float), 0.0,
             0.0, 0.0]
        )  # fmt: skip
        halted = ti.select(events != 0, 1.0, 0.0)
        batch[0] = ti.Vector(
            [remaining - dt, dt, moved, halted, ti.cast(k + 1, float), control[LAST_PROBE],
             probes_left, probes, pending, control[SPARE]]
        )  # fmt: skip

    @ti.func
    def probe_row(batch: ti.template(), k) -> int:
        row = -1
        if batch[0][TAKEN] == k + 1 and batch[k + 1][PROBE_TIMES] > 0:
            row = ti.cast(batch[0][PROBES], int) - 1
        return row

    @ti.func
    def sort_due(batch: ti.template()) -> bool:
        return running(batch) and batch[0][MOVED] > skin_bound

    @ti.func
    def mark_sorted(batch: ti.template()):
        batch[0][MOVED] = 0.0
        batch[ti.cast(batch[0][TAKEN], int)][SORTED] = 1.0

    return BatchControl(begin, live_count, running, finish, probe_row, sort_due, mark_sorted)
