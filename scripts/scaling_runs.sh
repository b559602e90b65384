#!/usr/bin/env bash
# The MPI runs still to make on GPUs (docs/scaling.md, issues 13 and 14); none has run yet.
#   bash scripts/scaling_runs.sh one-gpu  [OUT_DIR]   # nvidia-h200: 2 processes sharing a GPU
#   bash scripts/scaling_runs.sh two-gpus [OUT_DIR]   # nvidia-h200-x2: 1 against 2 GPUs
# On the GPU machine, carry .whl and `source scripts/device_env.sh` first (its header says how).
# Each run writes summary.json (particle-steps/s, decomposition, exchange_share); npz
# snapshots, since vtk cannot be carried to the GPU machines. Sizes are of the seed scene.
set -eu
mode=$1
out=${2:-outputs/scaling}
mkdir -p "$out"
dp_for() {  # the seed scene's dp for about $1 particles
    python -c "
from solver.bench import dp_for_particles
from solver.config import load_config
print(dp_for_particles(load_config('configs/dambreak.toml', []), $1))" | tail -1  # after Taichi's banner
}
run() {  # processes, name, dp, end, extra...
    local k=$1 name=$2 dp=$3 end=$4
    shift 4
    local launch=()
    [ "$k" -gt 1 ] && launch=(mpiexec -n "$k")
    "${launch[@]}" python -m solver.cli run configs/dambreak.toml --backend cuda --force \
        --out "$out/$name" --set particles.dp="$dp" --set time.end="$end" \
        --set output.vtk=false --set output.npz=true --set time.output_interval="$end" "$@"
}
same() {  # two runs' snapshots byte for byte
    python -c "
import sys, glob, numpy as np
a, b = sys.argv[1:]
for f in sorted(glob.glob(a + '/particles_*.npz')):
    x, y = np.load(f), np.load(f.replace(a, b, 1))
    assert all(x[k].tobytes() == y[k].tobytes() for k in x.files), f
print('identical:', a, b)" "$1" "$2"
}
dp20=$(dp_for 20000000)
case $mode in
one-gpu)  # the CUDA path of the exchange, bitwise; its cost per step at 20M on one GPU
    run 1 seed_1 0.0085 0.05
    run 2 seed_2 0.0085 0.05
    same "$out/seed_1" "$out/seed_2"
    run 1 seed_sy_1 0.0085 0.05 --set time.integrator=symplectic
    run 2 seed_sy_2 0.0085 0.05 --set time.integrator=symplectic
    same "$out/seed_sy_1" "$out/seed_sy_2"
    run 1 n20M_1 "$dp20" 0.002
    run 2 n20M_2 "$dp20" 0.002
    ;;
two-gpus)  # strong scaling at 20M and 64M, weak scaling at 20M per GPU, bitwise on 2 GPUs
    dp40=$(dp_for 40000000)
    dp64=$(dp_for 64000000)
    run 1 seed_1 0.0085 0.05
    run 2 seed_2 0.0085 0.05
    same "$out/seed_1" "$out/seed_2"
    run 1 n20M_1 "$dp20" 0.005
    run 2 n20M_2 "$dp20" 0.005
    run 2 n40M_2 "$dp40" 0.005
    run 1 n64M_1 "$dp64" 0.002
    run 2 n64M_2 "$dp64" 0.002
    ;;
*)
    echo "usage: $0 one-gpu|two-gpus [OUT_DIR]" >&2
    exit 2
    ;;
esac
