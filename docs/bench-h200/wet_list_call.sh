#!/usr/bin/env bash
# Device call for the mDBC pass's work list (issue 12, 2026-12-07, fifteenth session; log:
# wet_list_h100_log.txt; docs/performance.md, "The mDBC pass over the wet walls alone: measured,
# not kept"). It needs the tree of commit d29a2e4 (the change, kept as wet_list.patch) and main
# before it in devmain/ (`git archive 8e21eae solver configs scripts | tar -x -C devmain`; carry
# .whl without the MPI wheels, .gl and devmain). Ran once on an H100 in 330 s. Fresh processes, the codes alternating; the seed case's npz snapshots
# and SPHERIC's probes.csv compared bit for bit; Vulkan against CUDA at 1M with the change; the
# seed case's step task by task under Nsight Compute, both codes.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
where() { case $1 in main) echo $PWD/devmain ;; *) echo $PWD ;; esac; }
R() { # R CODE ARGS...: CODE is main (devmain/) or wet (this tree)
  local code=$1; shift; local root; root=$(where "$code")
  echo "== $code $*"
  (cd "$root" && PYTHONPATH=$root:$PYTHONPATH /usr/bin/time -f "process %e s" timeout "${TMO:-150}" \
    python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -2)
}
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
for c in main wet; do
  R $c run configs/dambreak.toml --backend cuda --out $W/warm_$c --force $NF --set time.end=0.02 --set time.output_interval=0.01
  R $c run configs/spheric_test2.toml --backend cuda --out $W/warm2_$c --force $NF --set time.end=0.02 --set time.output_interval=0.02
done
for r in 1 2; do for c in wet main; do
  R $c run configs/dambreak.toml --backend cuda --out $W/seed_${c}_$r --force $NF --set output.npz=true
done; done
for c in wet main; do TMO=100 R $c run configs/spheric_test2.toml --backend cuda --out $W/sp_$c --force $NF; done
python - <<'PY'
import filecmp, glob
import numpy as np
for r in (1, 2):
    a = sorted(glob.glob(f"/tmp/w/seed_main_{r}/*.npz")); b = sorted(glob.glob(f"/tmp/w/seed_wet_{r}/*.npz"))
    bad = sum(not np.array_equal(np.load(x)[k], np.load(y)[k]) for x, y in zip(a, b) for k in np.load(x).files)
    print(f"seed case run {r}: {len(a)} and {len(b)} npz snapshots, {bad} arrays differ")
same = filecmp.cmp("/tmp/w/sp_main/probes.csv", "/tmp/w/sp_wet/probes.csv", shallow=False)
print(f"SPHERIC probes.csv of wet the same bytes as main's: {same}")
PY
M="--set particles.dp=0.005042 --set time.end=0.05 --set time.output_interval=0.05 $NF"
for b in cuda vulkan cuda vulkan; do R wet run configs/dambreak.toml --backend $b --out $W/m1_$b --force $M; done
for c in wet main; do
  root=$(where $c)
  echo "== ncu $c, seed case, 1,500 launches after 40,000"
  (cd $root && PYTHONPATH=$root:$PYTHONPATH timeout 110 ncu --clock-control none --metrics gpu__time_duration.sum \
    --launch-skip 40000 --launch-count 1500 python -m solver.cli run configs/dambreak.toml --backend cuda $NF \
    --set time.end=0.6 --out $W/ncu_$c --force > $W/ncu_$c.txt 2>&1; python3 $PWD/scripts/step_tasks.py $W/ncu_$c.txt --rows 14)
done
cp $W/ncu_*.txt $OUT/ 2>/dev/null
for f in $W/seed_*_1/summary.json $W/sp_*/summary.json; do cp $f $OUT/$(basename $(dirname $f))_summary.json; done
