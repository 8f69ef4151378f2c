#!/usr/bin/env bash
# The main demo: two programs coupled through Tether. `heat` (a 1-D heat
# solver on 2 ranks that exchange halos) takes its boundary temperature
# from `sensor` every step and sends back the rod's mean temperature.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/build/examples"
mkdir -p "$out"
for prog in heat sensor; do
    cc -O2 -Wall -I"$root/include" "$root/examples/coupled/$prog.c" -o "$out/$prog" \
        -L"$root/build/lib" -ltether -Wl,-rpath,"$root/build/lib" -lm
done
cd "$out"
exec "$root/build/bin/tether" run --timeout 60 --name heat -n 2 ./heat 10 : --name sensor -n 1 ./sensor 10
