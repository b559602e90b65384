#!/usr/bin/env bash
# The resolution study of issue 11 with the shipped scene and sensors (even boundary lattice,
# P1..P8 read as DualSPHysics' MeasureTool), on the GPU machine, one device call a phase:
#   bash scripts/convergence_runs.sh six_seconds [OUT_DIR] [SECONDS]
#       SPHERIC test 2 over the benchmark's 6 s at dp 0.01, 0.02 and 0.04;
#   bash scripts/convergence_runs.sh walls [OUT_DIR] [SECONDS]
#       the seed case under mDBC (shipped) and OpenFPM's DBC with one wall layer, obstacle
#       sensors every 1 ms, compared by scripts/boundary_comparison.py; the column collapse at
#       a / dp = 20 (shipped) and 40, each validated;
#   bash scripts/convergence_runs.sh finest [OUT_DIR] [SECONDS] [END]
#       SPHERIC test 2 at dp 0.0075 (2.2M particles) over its first END seconds (default 2.5).
# (after `source scripts/device_env.sh` there). Runs go in order of importance and stop when
# SECONDS (default 570) have passed, so that a call keeps time to pack its results: every
# run's probes.csv, summary.json, config.toml and removed.csv, and the reports, go into
# OUT_DIR/results.tar.gz (snapshots stay there: a call returns few files).
# validation/README.md, section 3 ("Convergence as shipped"), has what they gave.
set -u
phase=${1:?six_seconds, walls or finest}
out=${2:-outputs/convergence}
deadline=$((SECONDS + ${3:-570}))
end=${4:-2.5}
mkdir -p "$out"
run() {  # config, name, overrides...
    local config=$1 name=$2 left=$((deadline - SECONDS))
    shift 2
    if [ "$left" -le 5 ]; then
        echo "$name: skipped, no time left"
        return
    fi
    timeout "$left" python -m solver.cli run "$config" --backend cuda --force \
        --out "$out/$name" --set output.vtk=false "$@" | tail -1
}
spheric() {  # name, dp, overrides...
    local name=$1 dp=$2
    shift 2
    run configs/spheric_test2.toml "$name" --set particles.dp="$dp" \
        --set time.output_interval=1.0 "$@"
}
case $phase in
six_seconds)
    spheric sp01 0.01
    spheric sp02 0.02
    spheric sp04 0.04
    ;;
walls)
    seed=(--set output.npz=true --set time.output_interval=0.05 --set output.probe_interval=0.001)
    run configs/dambreak.toml seed "${seed[@]}"
    run configs/dambreak.toml seed_dbc1 "${seed[@]}" --set physics.boundary=dbc \
        --set tank.wall_layers=1
    python scripts/boundary_comparison.py "$out/seed" "$out/seed_dbc1" --out "$out/seed_walls"
    run configs/column_collapse.toml cc20 --set output.npz=true
    run configs/column_collapse.toml cc40 --set output.npz=true --set particles.dp=0.00142875
    for name in cc20 cc40; do
        python -m solver.cli validate column_collapse --run "$out/$name" --out "$out/${name}_report"
    done
    ;;
finest)
    spheric sp0075 0.0075 --set time.end="$end"
    ;;
*)
    echo "unknown phase '$phase': six_seconds, walls or finest" >&2
    exit 2
    ;;
esac
(cd "$out" && tar czf results.tar.gz --exclude='particles_*' --exclude='*.pvd' \
    --exclude='checkpoint*' ./*)
ls -la "$out/results.tar.gz"
