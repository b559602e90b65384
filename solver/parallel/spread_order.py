"""A parallel loop's iterations dealt out so that every CPU thread gets a share of each region.

Taichi 1.7.4's CPU backend cuts a parallel range loop into contiguous parts, one a thread, and
does not rebalance them (measured on the 2-core machine: a loop whose work lies in the first
half of its range took 1.1 s on two threads as on one, where the same work spread over
alternating blocks of 1,000 iterations took 0.56 s; docs/performance.md, "CPU threads and
clustered work"). A loop over sorted particles has clustered work: the wall particles whose
ghost nodes lie in the water sit together in the sort, so the thread that gets them does most
of the mDBC pass while the others wait.

`spread_length(count)` is the length to give such a loop and `spread_index(t, count)` the item
that loop position t stands for (count or more: none, to be skipped). Positions take blocks of
SPREAD_BLOCK consecutive items, and consecutive blocks of positions come from SPREAD_LANES
equal segments of the range in turn, so any contiguous part of the positions holds an even
share of every segment. Each item is still visited once; only the order in which threads meet
them changes, so loops whose items are independent give the same bits.
"""

import taichi as ti

SPREAD_BLOCK = 32
"""Consecutive items a position block holds: the neighbours of consecutive sorted particles
overlap, so a block keeps their data in cache."""
SPREAD_LANES = 64
"""Segments of the range dealt out in turn: more than the threads a CPU backend runs."""


@ti.func
def spread_lane_blocks(count):
    """Blocks in each of the SPREAD_LANES segments of `count` items."""
    blocks = (count + SPREAD_BLOCK - 1) // SPREAD_BLOCK
    return (blocks + SPREAD_LANES - 1) // SPREAD_LANES


@ti.func
def spread_length(count):
    """How many positions a loop over `count` items in spread order runs."""
    return spread_lane_blocks(count) * SPREAD_LANES * SPREAD_BLOCK


@ti.func
def spread_index(t, count):
    """The item that position t stands for: below `count`, or `count` or more for none."""
    block = t // SPREAD_BLOCK
    segment_block = (block % SPREAD_LANES) * spread_lane_blocks(count) + block // SPREAD_LANES
    return segment_block * SPREAD_BLOCK + t % SPREAD_BLOCK
