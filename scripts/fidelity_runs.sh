#!/usr/bin/env bash
# The runs behind validation/README.md (sections 2 to 4: boundaries, SPHERIC test 2, column
# collapse, seed case), on the GPU machine; vtk need not be installed there:
#   bash scripts/fidelity_runs.sh [OUT_DIR]    (after `source scripts/device_env.sh` there)
# The SPHERIC dp = 0.04 run of the convergence study ran on the 2-core CPU instead (last lines).
set -u
out=${1:-outputs/fidelity}
mkdir -p "$out"
run() { python -m solver.cli run "$@" --force --set output.vtk=false; }
cuda() { run "$@" --backend cuda; }

# SPHERIC test 2: the shipped config (mDBC, alpha 0.01, 6 s, probes every 1 ms), dp = 0.01 over
# the first impact, and the viscosity and boundary variants at dp = 0.02.
cuda configs/spheric_test2.toml --out "$out/sp02"
cuda configs/spheric_test2.toml --out "$out/sp01" --set particles.dp=0.01 --set time.end=1.5
cuda configs/spheric_test2.toml --out "$out/sp02_sps" --set physics.viscosity=laminar_sps
cuda configs/spheric_test2.toml --out "$out/sp02_a01" --set physics.visc_alpha=0.1 \
    --set output.probe_interval=0.005
cuda configs/spheric_test2.toml --out "$out/sp02_a01_dbc" --set physics.visc_alpha=0.1 \
    --set physics.boundary=dbc --set output.probe_interval=0.005

# Seed case: mDBC (shipped) against OpenFPM's DBC with one wall layer.
cuda configs/dambreak.toml --out "$out/seed" --set output.npz=true --set time.output_interval=0.05
cuda configs/dambreak.toml --out "$out/seed_dbc1" --set physics.boundary=dbc \
    --set tank.wall_layers=1 --set output.npz=true --set time.output_interval=0.05
python scripts/boundary_comparison.py "$out/seed" "$out/seed_dbc1" --out "$out/seed_boundaries"

# Column collapse: the shipped alpha 0.01, alpha 0.1 and laminar + SPS.
for variant in shipped physics.visc_alpha=0.1 physics.viscosity=laminar_sps; do
    name=cc_${variant##*=}
    extra=()
    [ "$variant" != shipped ] && extra=(--set "$variant")
    cuda configs/column_collapse.toml --out "$out/$name" --set output.npz=true "${extra[@]}"
    python -m solver.cli validate column_collapse --run "$out/$name" --out "$out/${name}_report"
done

# The coarsest resolution of the convergence study, on the CPU, and the study itself.
run configs/spheric_test2.toml --backend cpu --out "$out/sp04" --set particles.dp=0.04 \
    --set time.end=1.5
python -m solver.cli validate spheric_test2 --runs "$out/sp04" "$out/sp02" "$out/sp01" \
    --out "$out/sp_convergence" --force
