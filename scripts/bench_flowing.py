"""Milliseconds per step at rest and in the flowing state, stepped as `dambreak run` steps.

`dambreak bench` times steps from rest; a dam break spends most of its run flowing, with the
water spread and sorts every few tens of steps. This script builds a case, times 1,000 steps
from rest, advances to `--flow-from` seconds (batches as `dambreak run` launches them, no
output), then times `--steps` steps from there:

    python scripts/bench_flowing.py configs/dambreak.toml --backend cuda --flow-from 0.6
"""

import argparse

from solver.backend import start_backend
from solver.bench import time_steps
from solver.config import load_config
from solver.simulation import Simulation


def timed(sim: Simulation, steps: int) -> tuple[float, int]:
    """(ms per step, sorts) over the next `steps` steps, timed as `dambreak bench` times."""
    result = time_steps(sim, steps)
    return 1e3 * result.wall_s / result.steps, result.sorts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="configs/dambreak.toml")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--flow-from", type=float, default=0.6, help="seconds (default 0.6)")
    parser.add_argument("--steps", type=int, default=2000, help="timed flowing steps")
    args = parser.parse_args()
    cfg = load_config(args.config)
    start_backend(args.backend, cfg.physics.precision, None, source=cfg.source)
    sim = Simulation(cfg)
    timed(sim, 50)  # compiles the step
    sim.compile_batch_sort()  # and the sort the batches queue
    ms, sorts = timed(sim, 1000)
    print(f"at rest: {ms:.3f} ms/step, {sorts} sorts in 1,000 steps")
    while sim.time < args.flow_from - 1e-9:
        sim.advance(args.flow_from, 64)
    ms, sorts = timed(sim, args.steps)
    print(f"flowing from t = {args.flow_from} s: {ms:.3f} ms/step, {sorts} sorts in {args.steps}")


if __name__ == "__main__":
    main()
