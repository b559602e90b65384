#!/usr/bin/env bash
# Device call M (2026-12-07, twelfth session): main with x_refinement 2 as the GPUs' default and
# the reorder in place. Selftests on CUDA and Vulkan, CPU (16 threads) against CUDA on the quick
# case, Vulkan against CUDA at 1M, the seed case and SPHERIC at X = 2 against 3, the seed case
# with its shipped output (npz).
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
R() { echo "== $*"; /usr/bin/time -f "process %e s" timeout "${TMO:-150}" python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -${TAIL:-3}; }
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
X3="--set neighbors.x_refinement=3"
R run configs/dambreak.toml --backend cuda --out $W/warm --force $NF --set time.end=0.02 --set time.output_interval=0.01
R run configs/dambreak.toml --backend cuda --out $W/warm --force $NF --set time.end=0.02 --set time.output_interval=0.01 $X3
R run configs/spheric_test2.toml --backend cuda --out $W/warm2 --force $NF --set time.end=0.04 --set time.output_interval=0.02
R run configs/spheric_test2.toml --backend cuda --out $W/warm2 --force $NF --set time.end=0.04 --set time.output_interval=0.02 $X3
R run configs/dambreak.toml --backend cuda --out $W/seed_x2 --force $NF
R run configs/dambreak.toml --backend cuda --out $W/seed_x3 --force $NF $X3
R run configs/dambreak.toml --backend cuda --out $W/seed_x2b --force $NF
R run configs/dambreak.toml --backend cuda --out $W/seed_x3b --force $NF $X3
TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_x2 --force $NF
TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_x3 --force $NF $X3
R run configs/dambreak.toml --backend cuda --out $W/seed_npz --force $NF --set output.npz=true
M="--set particles.dp=0.005042 --set time.end=0.05 --set time.output_interval=0.05 $NF"
for b in cuda vulkan cuda vulkan; do R run configs/dambreak.toml --backend $b --out $W/m1_$b --force $M; done
R run configs/quick.toml --backend cuda --out $W/q_cuda --force $NF --set output.npz=true
R run configs/quick.toml --backend cpu --threads 16 --out $W/q_cpu --force $NF --set output.npz=true
TAIL=14 R compare $W/q_cpu $W/q_cuda
TAIL=4 R selftest --backend cuda
TAIL=4 R selftest --backend vulkan
cd $W && tar czf $OUT/r.tgz --exclude='*.npz' --exclude='snapshots' --exclude='m1*' --exclude='warm*' . 2>/dev/null; ls -la $OUT
