#!/usr/bin/env bash
# Is the impact on the box converged in the sound speed? (validation/README.md, section 3, "The
# impact on the box"; issue 11.) SPHERIC test 2 over its first 0.7 s at coefsound 20, 40 and 80
# with alpha c0 held fixed (alpha 0.01, 0.005, 0.0025), so that Monaghan's viscosity
# alpha h c0 / 10 stays the same, and with the laminar + SPS viscosity, whose nu does not scale
# with c0. On the GPU machine, after `source scripts/device_env.sh`:
#   bash scripts/sound_speed_study.sh 0.02 [OUT_DIR]    # 1.5 minutes on the H200 (2026-12-02)
#   bash scripts/sound_speed_study.sh 0.01 [OUT_DIR]    # about 9: near a call's 10-minute limit
# (dp 0.02 measured: 13, 15, 23, 16 and 21 s a run; dp 0.01: 84 s at coefsound 40 and 92 s with
# laminar + SPS, so split the dp 0.01 runs over two calls). Copy probes.csv and summary.json
# back in one archive: a call returns few files.
# Prints, per run, P1..P4's arrival, 20 ms peak and first-impact impulse (spheric_metrics).
set -euo pipefail
dp=$1
out=${2:-outputs/sound_speed}
config=validation/runs/impact_study/config.toml
mkdir -p "$out"
runs=()
run() {  # name, overrides...
    local name=$1
    shift
    python -m solver.cli run "$config" --backend cuda --force --out "$out/$name" \
        --set particles.dp="$dp" --set time.end=0.7 --set time.output_interval=0.7 \
        --set output.vtk=false "$@" | tail -1
    runs+=("$out/$name")
}
run "dp${dp}_c20" --set physics.coefsound=20 --set physics.visc_alpha=0.01
run "dp${dp}_c40" --set physics.coefsound=40 --set physics.visc_alpha=0.005
run "dp${dp}_c80" --set physics.coefsound=80 --set physics.visc_alpha=0.0025
run "dp${dp}_c20_sps" --set physics.coefsound=20 --set physics.viscosity=laminar_sps
run "dp${dp}_c40_sps" --set physics.coefsound=40 --set physics.viscosity=laminar_sps
python - "${runs[@]}" <<'PY'
import sys
from pathlib import Path

from solver.output.probes import read_probes
from solver.validation.spheric_metrics import PRESSURE_WINDOW_S, first_impact, window_means

for run in sys.argv[1:]:
    t, series = read_probes(Path(run) / "probes.csv")
    cells = []
    for name in ("P1", "P2", "P3", "P4"):
        arrival, impulse = first_impact(t, series[name])
        peak = window_means(t, series[name], PRESSURE_WINDOW_S)[1].max()
        reached = "-" if arrival is None else f"{arrival:.3f} s"
        total = "-" if impulse is None else f"{impulse:.0f} Pa s"
        cells.append(f"{name} {reached}, peak {peak / 1e3:.1f} kPa, impulse {total}, "
                     f"min {series[name].min() / 1e3:.1f} kPa")
    print(f"{Path(run).name}: " + "; ".join(cells))
PY
