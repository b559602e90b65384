#!/usr/bin/env bash
# Device call 4 of issue 12's x_refinement work (2026-12-07, thirteenth session): main (X = 2 on
# GPUs, the reorder in place) on an H100: the cold compile with 4 and 16 LLVM compile workers,
# SPHERIC 6 s (X = 2 twice, X = 3 once), the seed case without files (twice) and with its npz
# snapshots, the 4M seed scene's first 0.05 s at X = 2 (twice), dambreak bench's memory at 4M.
set -u
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
R() { echo "== $*"; /usr/bin/time -f "process %e s" timeout "${TMO:-150}" python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -${TAIL:-3}; }
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
X3="--set neighbors.x_refinement=3"
M4="--set particles.dp=0.003015 --set time.end=0.05 --set time.output_interval=0.05"
# Cold compile of SPHERIC's kernels with Taichi's 4 LLVM compile workers against 16 (both caches emptied)
for t in 4 16 4 16; do rm -rf ~/.cache/taichi ~/.nv/ComputeCache; echo "TI_NUM_COMPILE_THREADS=$t"; TI_NUM_COMPILE_THREADS=$t TAIL=2 R run configs/spheric_test2.toml --backend cuda --out $W/cold$t --force $NF --set time.end=0.02 --set time.output_interval=0.02; done
R run configs/dambreak.toml --backend cuda --out $W/warm --force $NF --set time.end=0.02 --set time.output_interval=0.01
R run configs/spheric_test2.toml --backend cuda --out $W/warm2 --force $NF --set time.end=0.04 --set time.output_interval=0.02
R run configs/spheric_test2.toml --backend cuda --out $W/warm3 --force $NF --set time.end=0.04 --set time.output_interval=0.02 $X3
R run configs/dambreak.toml --backend cuda --out $W/warm4 --force $NF --set particles.dp=0.003015 --set time.end=0.002 --set time.output_interval=0.002
TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_x2 --force $NF
R run configs/dambreak.toml --backend cuda --out $W/seed_x2 --force $NF
TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_x3 --force $NF $X3
R run configs/dambreak.toml --backend cuda --out $W/seed_x2b --force $NF
TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_x2b --force $NF
R run configs/dambreak.toml --backend cuda --out $W/seed_npz --force $NF --set output.npz=true
R run configs/dambreak.toml --backend cuda --out $W/m4 --force $NF $M4
R run configs/dambreak.toml --backend cuda --out $W/m4b --force $NF $M4
TAIL=14 R bench configs/dambreak.toml --backend cuda --dp 0.003015 --steps 100 --warmup 10 --phase-steps 20
# PTX of every kernel the seed case and SPHERIC compile (offline cache off so that all are built);
# in the call itself PYTHONPATH lacked the carried taichi (fixed here), so this part ran in a
# second call on the same warm machine
R0=$PWD
for c in dambreak spheric_test2; do
  mkdir -p /tmp/ptx_$c && (cd /tmp/ptx_$c && TI_PRINT_KERNEL_ASM=1 TI_OFFLINE_CACHE=0 PYTHONPATH=$R0:${PYTHONPATH:-} timeout 120 python -m solver.cli run $R0/configs/$c.toml --backend cuda --out /tmp/w/ptx_$c --force $NF --set time.end=0.004 --set time.output_interval=0.004 2>&1 | tail -1; ls | wc -l)
done
(cd /tmp && tar czf $OUT/ptx.tgz ptx_dambreak ptx_spheric_test2)
cd $W && tar czf $OUT/r.tgz --exclude='*.npz' --exclude='snapshots' --exclude='warm*' . 2>/dev/null; ls -la $OUT
