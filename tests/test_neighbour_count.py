"""NeighbourTally: the mean of counts taken at a few moments of a run, by trapezoids."""

import pytest

from solver.neighbour_count import NeighbourTally


def test_tally_weights_each_interval_by_its_steps() -> None:
    tally = NeighbourTally()
    assert tally.mean is None
    tally.add(100.0, 0)
    assert tally.mean == 100.0  # one count, no step yet
    tally.add(110.0, 10)
    tally.add(130.0, 40)
    assert tally.mean == pytest.approx((10 * 105.0 + 30 * 120.0) / 40)


def test_tally_skips_counts_with_no_step_between() -> None:
    tally = NeighbourTally()
    tally.add(100.0, 0)
    tally.add(120.0, 20)
    tally.add(140.0, 20)  # e.g. a checkpoint at the same step: no steps to weight
    tally.add(140.0, 40)
    assert tally.mean == pytest.approx((20 * 110.0 + 20 * 140.0) / 40)
