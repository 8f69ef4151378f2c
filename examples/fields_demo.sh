#!/usr/bin/env bash
# The fields example: `sim`, a Fortran simulation on 4 ranks (2x2 BLOCK
# grid), puts its temperature field every step; `stats`, Python on 3 ranks
# (block-cyclic rows), prints statistics; `viz`, C on 2 ranks (boxes: the
# whole field and a zoom), writes pictures every 10 steps into
# build/examples/fields/. Needs `make build python` and gfortran.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/examples/fields"
python=${PYTHON:-python3}
steps=${1:-20}
mkdir -p "$out"
gfortran -O2 -I"$root/build/include" "$root/examples/fields/sim.f90" -J "$out" -o "$out/sim" \
    -L"$root/build/lib" -ltether_fortran -ltether -Wl,-rpath,"$root/build/lib"
cc -O2 -Wall -I"$root/include" "$root/examples/fields/viz.c" -o "$out/viz" \
    -L"$root/build/lib" -ltether -Wl,-rpath,"$root/build/lib"
exec "$root/build/bin/tether" run --timeout 120 --name sim -n 4 "$out/sim" "$steps" \
    : --name stats -n 3 "$python" "$root/examples/fields/stats.py" "$steps" \
    : --name viz -n 2 "$out/viz" "$steps" "$out"
