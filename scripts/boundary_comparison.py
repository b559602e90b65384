"""Runs of one case with different physics (e.g. mDBC against DBC), side by side.

    python scripts/boundary_comparison.py RUN_A RUN_B [...] --out DIR

`dambreak compare` refuses runs whose configs differ in physics (it judges backends); this
script puts such runs next to each other instead: for every snapshot (npz or vtp) of every run
the fluid's kinetic and potential energy (relative to the first run's initial potential
energy), its front and its fluid count (solver/validation/metrics.py), and every probe series.
Writes DIR/metrics.csv, DIR/energies_front.png and DIR/probes.png. The front is looked for in
the near-floor band that suits each run's walls: 2 dp under mDBC, 3 dp under DBC (whose moving
water rides 2 to 2.7 dp above the wall layer; see metrics.DEFAULT_FRONT_BAND_DP).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from solver.validation.metrics import DBC_FRONT_BAND_DP, compute_metrics  # noqa: E402
from solver.validation.run_folder import RunFolder  # noqa: E402


def main() -> None:
    """Parse the arguments, compute the metrics of every run, write the CSV and figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    series = {}
    for path in args.runs:
        run = RunFolder.open(path)
        band = {"front_band_dp": DBC_FRONT_BAND_DP} if run.config.physics.boundary == "dbc" else {}
        metrics = [compute_metrics(snap, run.config, **band) for snap in run.snapshots()]
        series[path.name] = metrics
        rows += [
            (path.name, m.time, m.kinetic_energy, m.potential_energy, m.front, m.fluid_count)
            for m in metrics
        ]
    with open(args.out / "metrics.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["run", "time", "kinetic_energy", "potential_energy", "front", "fluid"])
        writer.writerows(rows)

    reference = next(iter(series.values()))[0].potential_energy
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name, metrics in series.items():
        t = [m.time for m in metrics]
        axes[0].plot(t, [m.kinetic_energy / reference for m in metrics], label=name)
        axes[1].plot(t, [m.potential_energy / reference for m in metrics], label=name)
        axes[2].plot(t, [m.front for m in metrics], label=name)
    for axis, title in zip(axes, ("E_k / E_p0", "E_p / E_p0", "front x [m]"), strict=True):
        axis.set_title(title)
        axis.set_xlabel("t [s]")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(args.out / "energies_front.png", dpi=110)

    probes = {path.name: RunFolder.open(path).probes() for path in args.runs}
    names = list(next(iter(probes.values()))[1])
    if names:
        figure, axes = plt.subplots(len(names), 1, figsize=(8, 2.4 * len(names)), squeeze=False)
        for axis, probe in zip(axes[:, 0], names, strict=True):
            for name, (t, values) in probes.items():
                if probe in values:
                    axis.plot(t, values[probe], label=name, linewidth=0.8)
            axis.set_title(probe)
            axis.legend(fontsize=7)
        axes[-1, 0].set_xlabel("t [s]")
        figure.tight_layout()
        figure.savefig(args.out / "probes.png", dpi=110)
    print(f"wrote {args.out}/metrics.csv, energies_front.png, probes.png")


if __name__ == "__main__":
    main()
