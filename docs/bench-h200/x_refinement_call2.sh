#!/usr/bin/env bash
# Device call (2026-12-07, twelfth session) for docs/performance.md, "Cells thinner along x":
# `neighbors.x_refinement` (branch cells-per-axis, checked out as the working tree) at 1, 2 and
# 3 against main's solver at d0513bf (devmain, a copy of solver/ and configs/ beside it).
set -u
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader; lscpu | grep 'Model name'
W=/tmp/w; mkdir -p $W; P=$PWD
NF="--set output.vtk=false"
# R DIR X ARGS...: a run of DIR's code (X = - for main, which has no such key)
R() { local d=$1 x=$2; shift 2; local xs=(); [ "$x" != - ] && xs=(--set neighbors.x_refinement=$x)
  echo "== [$d x $x] $*"; (cd $d && /usr/bin/time -f "process %e s" timeout "${TMO:-150}" python -m solver.cli "$@" "${xs[@]}" 2>&1 | grep -v '^\[Taichi\]' | tail -2); }
B() { local d=$1 x=$2 c=$3; local xs=(); [ "$x" != - ] && xs=(--set neighbors.x_refinement=$x)
  echo "== bench $c [$d x $x]"; (cd $d && timeout 100 python -m solver.cli bench configs/$c.toml --backend cuda --steps 300 --warmup 20 --phase-steps 100 "${xs[@]}" 2>&1 | grep -E "ms/step|phases|per particle"); }
for dx in "devmain -" "$P 3"; do
  R $dx run configs/dambreak.toml --backend cuda --out $W/warm --force $NF --set time.end=0.02 --set time.output_interval=0.01
  R $dx run configs/spheric_test2.toml --backend cuda --out $W/warm2 --force $NF --set time.end=0.04 --set time.output_interval=0.02
done
TMO=100 R $P 3 run configs/spheric_test2.toml --backend cuda --out $W/sp_x3 --force $NF
TMO=100 R devmain - run configs/spheric_test2.toml --backend cuda --out $W/sp_main --force $NF
TMO=100 R $P 3 run configs/spheric_test2.toml --backend cuda --out $W/sp_x3b --force $NF
for dx in "devmain -" "$P 3"; do TMO=100 R $dx run configs/dambreak.toml --backend cuda --out $W/m4 --force $NF --set particles.dp=0.003015 --set time.end=0.05 --set time.output_interval=0.05; done
cd $W && tar czf $OUT/r.tgz --exclude='*.npz' --exclude='warm*' --exclude='m4' . 2>/dev/null; ls -la $OUT
