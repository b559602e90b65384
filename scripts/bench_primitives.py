"""Throughput of the portable building blocks: scan, sort with reorder, cell-list build.

Usage: python scripts/bench_primitives.py [--backend cuda] [--sizes 1M,4M,16M] [--repeats 5]

Prints elements (or particles) per second, the median of `repeats` timed runs after one
warm-up run (which compiles the kernels). The sort moves an i32 key and reorders 8 f32 arrays,
as a particle sort does; the cell-list build is CellGrid.update on random positions plus the
reorder of 8 f32 arrays, from random order and again from the order it found (a solver's sort
finds the particles where the last one left them). All run at the cell density of the
solver's water on the running backend (`particles_per_cell`: about 5.2 a cell on the CPU, 1.5
on GPUs), which matters for the sort: it ranks each element within its cell, at a cost of the
cell's size.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import taichi as ti  # noqa: E402

from solver.backend import BACKEND_CHOICES, running_arch, start_backend  # noqa: E402
from solver.config import SCHEMA  # noqa: E402
from solver.neighbors import default_cells_per_support  # noqa: E402


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 2**20}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def _median_seconds(action, repeats: int) -> float:
    action()
    ti.sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        ti.sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def particles_per_cell(on_cpu: bool) -> float:
    """Particles a cell of the solver's grid holds in water on a lattice of spacing dp: cells
    of support / cells_per_support, the support being 2 h_over_dp dp (the shipped default)."""
    h_over_dp = next(k.default for k in SCHEMA if (k.section, k.key) == ("physics", "h_over_dp"))
    return (2.0 * h_over_dp / default_cells_per_support(on_cpu)) ** 3


def bench(n: int, repeats: int, density: float) -> dict[str, float]:
    """Seconds per call of each building block for n elements, `density` elements a cell."""
    from solver.neighbors import CellGrid
    from solver.parallel.bucket_sort import BucketSort
    from solver.parallel.gather import gather
    from solver.parallel.scan import ExclusiveScan

    rng = np.random.default_rng(0)
    values = ti.ndarray(ti.i32, shape=n)
    values.from_numpy(rng.integers(0, 100, n, dtype=np.int32))
    out = ti.ndarray(ti.i32, shape=n)
    scan = ExclusiveScan(n)
    results = {"scan": _median_seconds(lambda: scan(values, out, n), repeats)}

    cells = max(round(n / density), 1)
    keys = ti.ndarray(ti.i32, shape=n)
    keys.from_numpy(rng.integers(0, cells, n, dtype=np.int32))
    index = ti.ndarray(ti.i32, shape=n)
    index.from_numpy(np.arange(n, dtype=np.int32))
    sorted_keys, order = ti.ndarray(ti.i32, shape=n), ti.ndarray(ti.i32, shape=n)
    arrays = [ti.ndarray(ti.f32, shape=n) for _ in range(8)]
    for array in arrays:
        array.from_numpy(rng.random(n, dtype=np.float32))
    spares = [ti.ndarray(ti.f32, shape=n) for _ in range(8)]
    sorter = BucketSort(n, cells)

    def reorder() -> None:
        for src, dst in zip(arrays, spares, strict=True):
            gather(src, dst, order, n)

    def sort_and_reorder() -> None:
        sorter(keys, index, order, sorted_keys, n)
        reorder()

    results["sort+reorder"] = _median_seconds(sort_and_reorder, repeats)

    side = (n / density) ** (1.0 / 3.0)
    grid = CellGrid((0, 0, 0), (1, 1, 1), 1.0 / side, n)
    position = ti.Vector.ndarray(3, ti.f32, shape=n)
    position.from_numpy(rng.random((n, 3), dtype=np.float32))
    removed = ti.ndarray(ti.i32, shape=n)
    removed.fill(0)

    def build() -> None:
        kept = grid.update(position, index, removed, n)
        for src, dst in zip(arrays, spares, strict=True):
            gather(src, dst, grid.order, kept)

    results["cell-list build+reorder"] = _median_seconds(build, repeats)

    # The solver's case: the particles where the last sort left them, a few moved since.
    settled = ti.Vector.ndarray(3, ti.f32, shape=n)
    settled_index = ti.ndarray(ti.i32, shape=n)
    grid.update(position, index, removed, n)
    gather(position, settled, grid.order, n)
    gather(index, settled_index, grid.order, n)

    def rebuild() -> None:
        kept = grid.update(settled, settled_index, removed, n)
        for src, dst in zip(arrays, spares, strict=True):
            gather(src, dst, grid.order, kept)

    results["cell-list re-sort+reorder"] = _median_seconds(rebuild, repeats)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--sizes", default="1M,4M,16M")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    info = start_backend(args.backend, "f32", args.threads)
    density = particles_per_cell(running_arch() == "cpu")
    print(f"backend {info.name} ({info.device}), taichi {info.taichi_version}")
    print(f"{density:.2f} elements a cell (the solver's water on this backend)")
    print(f"{'N':>10} {'block':<26} {'ms':>9} {'elements/s':>12}")
    for n in (_size(s) for s in args.sizes.split(",")):
        for name, seconds in bench(n, args.repeats, density).items():
            print(f"{n:>10} {name:<26} {seconds * 1e3:>9.3f} {n / seconds:>12.3e}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
