"""How many step kernels a batch launches (solver/step_batch.py).

The host launches a batch's kernels before the device has taken any of its steps, so it
guesses how many steps the device will take before the batch stops. A launch too many costs
the host one launch (0.1 to 0.2 ms on the H200's host) and the device a few empty tasks; a
launch too few ends the batch early, and the next batch starts after a read-back, the device
idle while the host prepares it: about the same price. The guess is the expected number of
steps, the smaller of

- the steps until a neighbour sort is due: the skin distance still unused over the distance
  the last full step (not shortened to land on a target) could move a particle
  (`displacement_bound` of its dt and maxima). Speeds and
  the time step change little from one step to the next, so the last step predicts the next
  ones; unlike the length of the last sort interval this needs no history, so it also holds
  for the first interval of a run, which is many times longer than the later ones while the
  water starts from rest;
- the steps to the batch's target time at the last full step's dt, plus one spare for a step
  that shrinks on the way.

Without a skin (the CPU's default when it keeps no neighbour lists) a sort is due after every
step, so batches are one step long and no launch is wasted.
"""

import math


def batch_size(
    max_steps: int, remaining: float, skin_left: float, dt: float, step_reach: float
) -> int:
    """Kernels to launch, at most `max_steps`, toward a target `remaining` seconds away, with
    `skin_left` of the skin unused; `dt` and `step_reach` are those of the last step that was
    not shortened to land on a target (a shortened one predicts nothing), its time step (0:
    none yet, so one launch) and how far it could move a particle. `skin_left` infinite: the
    batch's own sorts take the sorts due (solver/batch_sort.py), so they do not end it."""
    if dt <= 0.0:
        return 1
    expected = max_steps
    if math.isfinite(remaining):
        expected = min(expected, math.ceil(remaining / dt) + 1)
    if step_reach > 0.0 and math.isfinite(skin_left):
        expected = min(expected, math.floor(max(skin_left, 0.0) / step_reach) + 1)
    return max(expected, 1)
