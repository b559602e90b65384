#!/usr/bin/env bash
# SPHERIC test 2 with its sensors read both ways (validation/README.md, section 3, "Reading the
# sensors as DualSPHysics does"; issue 11): P1..P8 as DualSPHysics' MeasureTool reads a face,
# P1_face..P8_face on the face. The shipped config over the benchmark's 6 s, then the first
# impact (0.7 s) at dp 0.04 to 0.0075 with the artificial viscosity (alpha 0.01, shipped) and
# the laminar + SPS model. On the GPU machine, after `source scripts/device_env.sh`:
#   bash scripts/sensor_reading_study.sh [OUT_DIR] [SECONDS]
# Runs go in order of importance and stop when SECONDS (default 560) have passed, so that a
# device call keeps time to pack its results: the runs' probes.csv, summary.json and
# config.toml go into OUT_DIR/results.tar.gz (a call returns few files).
set -u
out=${1:-outputs/sensor_reading}
deadline=$((SECONDS + ${2:-560}))
mkdir -p "$out"
run() {  # name, config overrides...
    local name=$1 left=$((deadline - SECONDS))
    shift
    if [ "$left" -le 5 ]; then
        echo "$name: skipped, no time left"
        return
    fi
    timeout "$left" python -m solver.cli run configs/spheric_test2.toml --backend cuda --force \
        --out "$out/$name" --set output.vtk=false "$@" | tail -1
}
impact() {  # name, dp, overrides...: the first impact only
    local name=$1 dp=$2
    shift 2
    run "$name" --set particles.dp="$dp" --set time.end=0.7 --set time.output_interval=0.7 "$@"
}
run sp02
impact a04 0.04
impact s04 0.04 --set physics.viscosity=laminar_sps
impact s02 0.02 --set physics.viscosity=laminar_sps
impact a01 0.01
impact s01 0.01 --set physics.viscosity=laminar_sps
impact a0075 0.0075
impact s0075 0.0075 --set physics.viscosity=laminar_sps
(cd "$out" && tar czf results.tar.gz ./*/probes.csv ./*/summary.json ./*/config.toml)
ls -la "$out/results.tar.gz"
