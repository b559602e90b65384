#!/usr/bin/env bash
# The benchmark table of docs/performance.md in one go (run it on the GPU machine):
#   bash scripts/bench_table.sh [OUT_DIR]
# Writes one JSON object per row into OUT_DIR (default outputs/bench) and prints a summary.
# The seed-case runs write no VTK (the vtk package need not be installed).
set -u
out=${1:-outputs/bench}
mkdir -p "$out"
bench() { python -m solver.cli bench "$@" --json 2>/dev/null | tail -1; }

bench --backend cuda --steps 20 --warmup 2 --phase-steps 0 > "$out/startup_cold.json"
bench --backend cuda --steps 20 --warmup 2 --phase-steps 0 > "$out/startup_warm.json"
for k in 1 2; do
    python -m solver.cli run configs/dambreak.toml --backend cuda --force \
        --out "$out/seed_run_$k" --set output.vtk=false
    cp "$out/seed_run_$k/summary.json" "$out/seed_summary_$k.json"
done
bench --backend cuda --steps 200 --set neighbors.skin=0 > "$out/seed_skin0.json"
for n in 200000 1000000 4000000 16000000 64000000; do
    bench --backend cuda --particles "$n" --steps 100 --warmup 20 --phase-steps 20 \
        > "$out/cuda_$n.json"
done
for threads in 16 1; do
    bench --backend cpu --threads "$threads" --particles 1000000 --steps 4 --warmup 2 \
        --phase-steps 1 > "$out/cpu_t$threads.json"
done
python - "$out" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(path.read_text())
    if "ms_per_step" in r:
        print(f"{path.stem:16s} N={r['particles']:>10,} {r['ms_per_step']:9.3f} ms/step "
              f"{r['particle_steps_per_second']:.3g} particle-steps/s "
              f"{r['neighbour_interactions_per_second']:.3g} interactions/s")
    else:
        print(f"{path.stem:16s} {r['wall_time_s']:.1f} s for {r['steps']} steps")
PY
