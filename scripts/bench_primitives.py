"""Throughput of the portable building blocks: scan, sort with reorder, cell-list build.

Usage: python scripts/bench_primitives.py [--backend cuda] [--sizes 1M,4M,16M] [--repeats 5]

Prints elements (or particles) per second, the median of `repeats` timed runs after one
warm-up run (which compiles the kernels). The sort moves an i32 key and reorders 8 f32 arrays,
as a particle sort does; the cell-list build is CellGrid.update on random positions at the
density of an SPH run (about 40 particles per cell) plus the reorder of 8 f32 arrays.
"""

import argparse
import statistics
import sys
import time

import numpy as np
import taichi as ti

from solver.backend import BACKEND_CHOICES, start_backend


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


def bench(n: int, repeats: int) -> dict[str, float]:
    """Seconds per call of each building block for n elements."""
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

    cells = max(n // 40, 1)
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

    side = (n / 40.0) ** (1.0 / 3.0)
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
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--sizes", default="1M,4M,16M")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    info = start_backend(args.backend, "f32", args.threads)
    print(f"backend {info.name} ({info.device}), taichi {info.taichi_version}")
    print(f"{'N':>10} {'block':<24} {'ms':>9} {'elements/s':>12}")
    for n in (_size(s) for s in args.sizes.split(",")):
        for name, seconds in bench(n, args.repeats).items():
            print(f"{n:>10} {name:<24} {seconds * 1e3:>9.3f} {n / seconds:>12.3e}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
