#!/usr/bin/env bash
# The Python coupling example: `sim`, a C "simulation" on 2 ranks, streams
# its field every step to `ml`, a Python model (numpy) that sends a
# correction back. Needs `make build python` (make demo-python does both).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/examples"
python=${PYTHON:-python3}
mkdir -p "$out"
cc -O2 -Wall -I"$root/include" -I"$root/examples/coupled" "$root/examples/python_coupling/sim.c" -o "$out/sim" \
    -L"$root/build/lib" -ltether -Wl,-rpath,"$root/build/lib" -lm
steps=${1:-5}
exec "$root/build/bin/tether" run --timeout 60 --name sim -n 2 "$out/sim" "$steps" \
    : --name ml -n 1 "$python" "$root/examples/python_coupling/model.py" "$steps"
