#!/usr/bin/env bash
# Device call for the compute-graph launches (issue 12, 2026-12-07, fourteenth session), run
# once on an H100 (log: graph_launch_h100_log.txt; docs/performance.md, "The fused step launched
# through a compute graph: measured, not kept"). It needs the tree of commit 2518124 (the graph
# code and scripts/launch_cost.py, no longer on main) and main before the change in devmain/
# (`git archive 5ba77f9 solver configs scripts | tar -x -C devmain`; carry .whl and devmain).
# Each command runs in a fresh process, the codes alternating; the seed case's npz snapshots
# and SPHERIC's probes.csv are compared bit for bit.
# A third code, "wide", is the change with sort_window_wider.patch applied (in /tmp/wide): the
# sorts' window one step wider for each later expected sort of a batch, which removed four
# fifths of the batches halted by a sort not queued but cost more host time in queued sorts
# when they were plain calls ("Where a batch queues its sorts"). 343 s on the H100.
set -u
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
for c in dambreak spheric_test2; do timeout 120 python scripts/launch_cost.py configs/$c.toml --backend cuda 2>&1 | grep -v Taichi | tail -1; done
mkdir -p /tmp/wide && cp -r solver configs scripts /tmp/wide/ &&
  (patch -s -p1 -d /tmp/wide < docs/bench-h200/sort_window_wider.patch || echo "wide: patch failed")
where() { case $1 in main) echo $PWD/devmain ;; wide) echo /tmp/wide ;; *) echo $PWD ;; esac; }
R() { # R CODE ARGS...: CODE is main (devmain/), graph (this tree) or wide (/tmp/wide)
  local code=$1; shift; local root; root=$(where "$code")
  echo "== $code $*"
  (cd "$root" && PYTHONPATH=$root:$PYTHONPATH /usr/bin/time -f "process %e s" timeout "${TMO:-150}" \
    python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -2)
}
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
for c in main graph wide; do
  R $c run configs/dambreak.toml --backend cuda --out $W/warm_$c --force $NF --set time.end=0.02 --set time.output_interval=0.01
  R $c run configs/spheric_test2.toml --backend cuda --out $W/warm2_$c --force $NF --set time.end=0.02 --set time.output_interval=0.02
done
for r in 1 2; do for c in graph main wide; do
  R $c run configs/dambreak.toml --backend cuda --out $W/seed_${c}_$r --force $NF --set output.npz=true
done; done
for c in graph main wide; do TMO=100 R $c run configs/spheric_test2.toml --backend cuda --out $W/sp_$c --force $NF; done
# The quick case (8,711 particles), whose device step is far shorter than a launch prepared in Python
for r in 1 2; do for c in graph main; do R $c run configs/quick.toml --backend cuda --out $W/q_${c}_$r --force $NF; done; done
for c in graph main; do
  root=$(where $c)
  echo "== profile_host $c, seed case to 0.5 s"
  (cd $root && PYTHONPATH=$root:$PYTHONPATH timeout 120 python scripts/profile_host.py configs/dambreak.toml --backend cuda --end 0.5 2>&1 | grep -v Taichi | tail -16)
done
python - <<'PY'
import filecmp, glob
import numpy as np
a = sorted(glob.glob("/tmp/w/seed_main_1/*.npz")); b = sorted(glob.glob("/tmp/w/seed_graph_1/*.npz"))
bad = sum(not np.array_equal(np.load(x)[k], np.load(y)[k]) for x, y in zip(a, b) for k in np.load(x).files)
print(f"seed case: {len(a)} and {len(b)} npz snapshots, {bad} arrays differ")
for c in ("graph", "wide"):
    same = filecmp.cmp("/tmp/w/sp_main/probes.csv", f"/tmp/w/sp_{c}/probes.csv", shallow=False)
    print(f"SPHERIC probes.csv of {c} the same bytes as main's: {same}")
PY
