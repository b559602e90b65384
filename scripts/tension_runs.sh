#!/usr/bin/env bash
# Which term sets the tension on the SPHERIC box's top at dp 0.02 (validation/README.md,
# section 3, "Tension on the box's top"): the first 1.2 s as shipped and with one term changed
# at a time (density diffusion, viscosity), on the GPU machine, then each run's tension per
# sensor (solver/validation/spheric_metrics.py `tension`):
#   bash scripts/tension_runs.sh [OUT_DIR]    (after `source scripts/device_env.sh` there)
set -u
out=${1:-outputs/tension}
mkdir -p "$out"
names=(shipped molteni nodiff alpha01 sps)
settings=("" physics.density_diffusion=molteni physics.density_diffusion=none
    physics.visc_alpha=0.1 physics.viscosity=laminar_sps)
for k in "${!names[@]}"; do
    extra=()
    [ -n "${settings[$k]}" ] && extra=(--set "${settings[$k]}")
    python -m solver.cli run configs/spheric_test2.toml --backend cuda --force \
        --out "$out/${names[$k]}" --set output.vtk=false --set time.end=1.2 \
        --set time.output_interval=0.6 "${extra[@]}" | tail -1
done
python - "$out" "${names[@]}" <<'PY'
import sys
from pathlib import Path

import numpy as np

from solver.validation.spheric_metrics import tension

out = Path(sys.argv[1])
for name in sys.argv[2:]:
    data = np.genfromtxt(out / name / "probes.csv", delimiter=",", names=True)
    cells = []
    for sensor in ("P3", "P4", "P5", "P6", "P7", "P8"):
        t = tension(data["time"], data[sensor])
        cells.append(f"{sensor} {t['smallest']:.0f} Pa, {t['seconds']:.2f} s")
    print(f"{name:8s} " + " | ".join(cells))
PY
