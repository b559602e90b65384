#!/usr/bin/env bash
# The patch these variables need is docs/bench-h200/block_regs.patch (against main at 1899e3c).
# Device call Q (2026-12-07, thirteenth session): the GPU block size as the register cap.
# Taichi 1.7.4 declares each CUDA loop's block size to ptxas (.maxntid B) with
# .minnctapersm 2, so blocks of B threads cap a thread at 65536 / (2 B) registers:
# 384 -> 80, 448 -> 72, 512 -> 64 (the interaction uses 92 at 128, the mDBC pass 72).
# DAMBREAK_INTERACTION_BLOCK / DAMBREAK_MDBC_BLOCK (a throwaway patch) choose the blocks;
# DAMBREAK_NO_SELF_TEST=1 drops the interaction's j != i test (the self pair adds zeros).
set -u
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
R() { echo "== I=${DAMBREAK_INTERACTION_BLOCK:-0} M=${DAMBREAK_MDBC_BLOCK:-0} S=${DAMBREAK_NO_SELF_TEST:-0} $*"; /usr/bin/time -f "process %e s" timeout "${TMO:-150}" python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -${TAIL:-3}; }
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
B="--backend cuda --steps 300 --warmup 20 --phase-steps 100"
V=("0 0" "512 0" "448 0" "0 512" "512 512")
for c in dambreak spheric_test2; do
  for v in "${V[@]}"; do set -- $v
    DAMBREAK_INTERACTION_BLOCK=$1 DAMBREAK_MDBC_BLOCK=$2 TAIL=6 R bench configs/$c.toml $B
  done
  DAMBREAK_NO_SELF_TEST=1 TAIL=6 R bench configs/$c.toml $B
done
for v in "0 0" "512 512" "448 0"; do set -- $v
  DAMBREAK_INTERACTION_BLOCK=$1 DAMBREAK_MDBC_BLOCK=$2 R run configs/dambreak.toml --backend cuda --out $W/seed_$1_$2 --force $NF
done
DAMBREAK_NO_SELF_TEST=1 R run configs/dambreak.toml --backend cuda --out $W/seed_ns --force $NF
for v in "0 0" "512 512"; do set -- $v
  DAMBREAK_INTERACTION_BLOCK=$1 DAMBREAK_MDBC_BLOCK=$2 TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_$1_$2 --force $NF
done
DAMBREAK_NO_SELF_TEST=1 TMO=100 R run configs/spheric_test2.toml --backend cuda --out $W/sp_ns --force $NF
cd $W && tar czf $OUT/r.tgz --exclude='*.npz' --exclude='snapshots' . 2>/dev/null; ls -la $OUT
# A second call on the same warm machine, to confirm the seed case (each in a fresh process):
#   for v in "512 512" "0 0" "512 0"; do set -- $v; DAMBREAK_INTERACTION_BLOCK=$1 DAMBREAK_MDBC_BLOCK=$2 \
#     python -m solver.cli run configs/dambreak.toml --backend cuda --out /tmp/w/c_$1_$2 --force --set output.vtk=false; done
# gave 3.09e8, 2.68e8 and 3.18e8 particle-steps/s.
