#!/usr/bin/env bash
# The Python packages the lent GPU machine lacks (taichi, dill, MPICH, mpi4py), carried as
# wheels in .whl/ (ignored by git; 50 MB with the repository's 10 MB, under the 64 MiB a call
# may carry):
#   bash scripts/device_env.sh wheels      # here, once: download them, taichi without its C API
#   source scripts/device_env.sh           # there, at the start of every call carrying .whl
# Installing is skipped where a warm machine has the packages already: two calls that
# installed them again over the first call's hung for their whole time limit (2026-12-02; the
# cause was not found, the same install on a fresh machine took 5 s). Every step has a time
# limit. Not yet seen there: mpi4py finding MPICH's library through LD_LIBRARY_PATH. `python` runs the image's python3 through a script, not a link: a
# link would leave the image's virtual environment (and its numpy) behind.
if [ "${1:-}" = wheels ]; then
    set -eu
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
    platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --platform manylinux1_x86_64)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d .whl taichi==1.7.4 dill mpich mpi4py
    # taichi's C API library (55 MB) and headers serve C programs, not Python: drop them so
    # that the MPI wheels fit beside it.
    work=$(mktemp -d)
    wheel=$(ls .whl/taichi-1.7.4-*.whl)
    (cd "$work" && python3 -m zipfile -e "$OLDPWD/$wheel" . &&
        rm -rf taichi/_lib/c_api taichi-1.7.4.data/data/include taichi/assets/static &&
        python3 - <<'PY'
import pathlib
record = next(pathlib.Path(".").glob("taichi-*.dist-info/RECORD"))
kept = [line for line in record.read_text().splitlines()
        if pathlib.Path(line.split(",")[0]).exists()]
record.write_text("\n".join(kept) + "\n")
PY
    )
    rm "$wheel"
    (cd "$work" && python3 -m zipfile -c "$OLDPWD/$wheel" ./*)
    rm -rf "$work"
    du -ch .whl/*.whl | tail -1
    return 0 2>/dev/null || exit 0
fi
pip_in() { timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$@"; }
[ -d /tmp/site/taichi ] || pip_in --target /tmp/site .whl/taichi*.whl .whl/dill*.whl ||
    echo "device_env: taichi did not install"
[ -x /tmp/mpi/bin/mpiexec ] || pip_in --prefix /tmp/mpi .whl/mpich*.whl .whl/mpi4py*.whl ||
    echo "device_env: MPI did not install"
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/bin/python
chmod +x /tmp/bin/python
PYTHONPATH=/tmp/site:$(echo /tmp/mpi/lib/python3*/site-packages):$PWD
export PYTHONPATH PATH=/tmp/bin:/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib PYTHONUNBUFFERED=1
