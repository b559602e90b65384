"""What launching the fused step costs the host: a plain Taichi call against a compute graph.

Usage: python3 scripts/launch_cost.py [CONFIG] [--backend B] [--repeats R] [--set key=value ...]

Builds CONFIG's simulation (default: the seed case) on backend B, takes one batch of steps so
that every kernel is compiled, then launches the fused step (solver/fused_step.py) R times with
its particle count set to 0, first as a plain Taichi call and then through the compute graph
the solver uses (solver/launch_graph.py), and prints the microseconds a launch takes for each,
the device drained before and after each series. With no particles the device has almost
nothing to do, so on a GPU the figures are the host's preparation of a launch: Python setting
the arguments, then the runtime launching the kernel's tasks (docs/performance.md, "The fused
step launched through a compute graph"). On the CPU the tasks also run, synchronously.
The state the count-0 launches leave (the batch records, a slot of the time-step maxima) is
thrown away with the simulation.
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

from solver.backend import start_backend  # noqa: E402
from solver.config import load_config  # noqa: E402
from solver.scene import build_scene  # noqa: E402
from solver.simulation import Simulation  # noqa: E402


def seconds_per_launch(launch: Callable[..., None], args: tuple, repeats: int) -> float:
    """Mean wall time of `repeats` launches of `launch(*args)`, the device drained around."""
    launch(*args)
    ti.sync()
    started = time.perf_counter()
    for _ in range(repeats):
        launch(*args)
    ti.sync()
    return (time.perf_counter() - started) / repeats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "configs" / "dambreak.toml"))
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    cfg = load_config(Path(args.config), args.overrides)
    start_backend(args.backend, cfg.physics.precision, None, source=cfg.source)
    sim = Simulation(cfg, build_scene(cfg))
    graph_launch = sim._verlet_step_kernel
    captured: list[tuple] = []

    def capture(*launch_args) -> None:
        captured.append(launch_args)
        graph_launch(*launch_args)

    sim._verlet_step_kernel = capture
    sim.advance(sim.time + 10 * cfg.time.cfl * cfg.dp / cfg.sound_speed)
    sim._verlet_step_kernel = graph_launch
    names = [argument.name for argument in graph_launch.kernel._primal.arguments]
    launch_args = list(captured[-1])
    launch_args[names.index("n")] = 0
    plain = seconds_per_launch(graph_launch.kernel, tuple(launch_args), args.repeats)
    graphed = seconds_per_launch(graph_launch, tuple(launch_args), args.repeats)
    print(
        f"{cfg.name} on {args.backend}: the fused step's {len(names)} arguments, "
        f"{args.repeats} launches with no particles: plain call {1e6 * plain:.0f} us, "
        f"compute graph {1e6 * graphed:.0f} us a launch"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
