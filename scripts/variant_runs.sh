#!/usr/bin/env bash
# SPHERIC test 2 at dp 0.02 with one term changed at a time (validation/README.md, section 3,
# "Tension on the box's top"): the first 1.2 s as shipped, with other density diffusion and
# viscosity, and with the symplectic scheme, on the GPU machine; then each run's P1 impact
# (arrival, impulse) and tension per sensor (solver/validation/spheric_metrics.py):
#   bash scripts/variant_runs.sh [OUT_DIR]    (after `source scripts/device_env.sh` there)
set -u
out=${1:-outputs/variants_dp002}
mkdir -p "$out"
names=(shipped molteni nodiff alpha01 sps symplectic)
settings=("" physics.density_diffusion=molteni physics.density_diffusion=none
    physics.visc_alpha=0.1 physics.viscosity=laminar_sps time.integrator=symplectic)
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

from solver.validation.spheric_metrics import first_impact, tension

out = Path(sys.argv[1])
for name in sys.argv[2:]:
    data = np.genfromtxt(out / name / "probes.csv", delimiter=",", names=True)
    arrival, impulse = first_impact(data["time"], data["P1"])
    cells = [f"P1 arrival {arrival:.3f} s, impulse {impulse:.0f} Pa s"]
    for sensor in ("P3", "P4", "P5", "P6", "P7", "P8"):
        t = tension(data["time"], data[sensor])
        cells.append(f"{sensor} {t['smallest']:.0f} Pa, {t['seconds']:.2f} s")
    print(f"{name:8s} " + " | ".join(cells))
PY
