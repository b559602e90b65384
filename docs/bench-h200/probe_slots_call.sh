#!/usr/bin/env bash
# Device call for the probe points' rows dealt to 32 threads a point (issue 12, 2026-12-07,
# fifteenth session; docs/performance.md, "Probe points' rows shared by 32 threads: built, not
# measured"). NOT RUN: refused in the fifteenth session until its device time ran out, and
# again in the sixteenth (2026-12-08: ten refused, five turned away, then no more lent). It
# needs the change applied to the tree (`git apply docs/bench-h200/probe_slots.patch`) and main
# without it in devmain/ (`mkdir devmain`, then `git archive HEAD solver configs scripts |
# tar -x -C devmain`); carry .whl without the MPI wheels, and devmain. Fresh processes, the
# codes alternating: SPHERIC test 2 over 6 s (probes every 1 ms), then the seed case with its
# npz snapshots, whose states must be the same bits (probes do not act on the flow); the seed
# case under DBC with one wall layer (DualSPHysics' CaseDambreak boundary, 171,665 particles)
# with its snapshots; SPHERIC's step task by task under Nsight Compute; a SPHERIC start-up
# under cProfile (where the seconds before the first step go on CUDA with Taichi's cache warm).
# About 330 s.
set -u
source scripts/device_env.sh >/dev/null 2>&1
log=$OUT/log.txt
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'
where() { case $1 in main) echo $PWD/devmain ;; *) echo $PWD ;; esac; }
R() { # R CODE ARGS...: CODE is main (devmain/) or slots (this tree)
  local code=$1; shift; local root; root=$(where "$code")
  echo "== $code $*"
  (cd "$root" && PYTHONPATH=$root:$PYTHONPATH /usr/bin/time -f "process %e s" timeout "${TMO:-150}" \
    python -m solver.cli "$@" 2>&1 | grep -v '^\[Taichi\]' | tail -2)
}
W=/tmp/w; mkdir -p $W
NF="--set output.vtk=false"
for c in main slots; do
  R $c run configs/spheric_test2.toml --backend cuda --out $W/warm2_$c --force $NF --set time.end=0.02 --set time.output_interval=0.02
done
for r in 1; do for c in slots main; do TMO=100 R $c run configs/spheric_test2.toml --backend cuda --out $W/sp_${c}_$r --force $NF; done; done
python - <<'PY'
import numpy as np
m = np.genfromtxt("/tmp/w/sp_main_1/probes.csv", delimiter=",", names=True)
s = np.genfromtxt("/tmp/w/sp_slots_1/probes.csv", delimiter=",", names=True)
print("SPHERIC probes.csv rows", len(m), len(s))
for n in m.dtype.names[1:]:
    print(f"  {n}: largest difference {np.nanmax(np.abs(m[n] - s[n])):.3g} (largest value {np.nanmax(np.abs(m[n])):.3g})")
PY
for c in slots main; do R $c run configs/dambreak.toml --backend cuda --out $W/seed_$c --force $NF --set output.npz=true; done
python - <<'PY'
import glob
import numpy as np
a = sorted(glob.glob("/tmp/w/seed_main/*.npz")); b = sorted(glob.glob("/tmp/w/seed_slots/*.npz"))
bad = sum(not np.array_equal(np.load(x)[k], np.load(y)[k]) for x, y in zip(a, b) for k in np.load(x).files)
print(f"seed case: {len(a)} and {len(b)} npz snapshots, {bad} arrays differ")
PY
echo "== the seed case under DualSPHysics' CaseDambreak boundary (DBC, one layer: 171,665 particles), npz snapshots"
R slots run configs/dambreak.toml --backend cuda --out $W/seed_dbc --force $NF --set output.npz=true --set physics.boundary=dbc --set tank.wall_layers=1
ST=$PWD/scripts/step_tasks.py
for c in slots; do
  root=$(where $c)
  echo "== ncu $c, SPHERIC, 1,500 launches after 40,000"
  (cd $root && PYTHONPATH=$root:$PYTHONPATH timeout 80 ncu --clock-control none --metrics gpu__time_duration.sum \
    --launch-skip 40000 --launch-count 1500 python -m solver.cli run configs/spheric_test2.toml --backend cuda $NF \
    --set time.end=1.0 --out $W/ncu_$c --force > $W/ncu_$c.txt 2>&1; python3 $ST $W/ncu_$c.txt --rows 10)
done
echo "== start-up of a SPHERIC run on CUDA with Taichi's cache warm (cProfile, 0.002 s of flow)"
timeout 60 python -m cProfile -o $W/start.prof -m solver.cli run configs/spheric_test2.toml --backend cuda $NF \
  --set time.end=0.002 --set time.output_interval=0.002 --out $W/start --force 2>&1 | tail -1
python3 - <<'PY'
import pstats
stats = pstats.Stats("/tmp/w/start.prof")
stats.sort_stats("tottime").print_stats(12)
stats.sort_stats("cumulative").print_stats(30)
PY
