"""Time the parts of a probe sample on one backend: the standalone probe kernel with its
read-back, reading a batch's probe rows back, and the host's readings from the
sums (docs/performance.md, issue 12). SPHERIC test 2 is run to `--time` first, so that water
is on the gauges:

    python scripts/bench_probes.py --backend cuda --time 0.4 --repeat 200
"""

import argparse
import time
from collections.abc import Callable

import taichi as ti

from solver.backend import start_backend
from solver.config import load_config
from solver.output.device_probes import DeviceProbes
from solver.scene import build_scene
from solver.simulation import Simulation


def main() -> None:
    """Run the case to --time, then time each part --repeat times and print ms per call."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--config", default="configs/spheric_test2.toml")
    parser.add_argument("--time", type=float, default=0.4, help="simulated time to run first [s]")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    cfg = load_config(args.config)
    start_backend(args.backend, cfg.physics.precision)
    sim = Simulation(cfg, build_scene(cfg))
    probes = DeviceProbes(cfg, sim)
    while sim.time < args.time:
        sim.advance(args.time)
    sums = probes.sums()
    parts: dict[str, Callable[[], object]] = {
        "probe kernel and read-back": probes.point_sums,
        "probe rows read-back": sim.probe_points.rows.to_numpy,
        "readings from the sums (host)": lambda: probes.sampler.readings(*sums),
    }
    print(f"{args.config} on {args.backend}, t = {sim.time:.4g} s, {sim.count} particles")
    for label, call in parts.items():
        call()
        ti.sync()
        start = time.perf_counter()
        for _ in range(args.repeat):
            call()
        ti.sync()
        print(f"{label}: {(time.perf_counter() - start) / args.repeat * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
