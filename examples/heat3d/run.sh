#!/usr/bin/env bash
# The heat coupling example (examples/heat3d/README.md): builds the
# file-coupled and the Tether-coupled versions of Code-1, Code-2 and
# Code-3 with mpifort against build/, runs both, and compares them.
#
#   run.sh [--mode steps|wallclock] [--out DIR] [--quiet]
#
# --mode steps (the default) advances the source by step count, so both
# versions compute the same temperatures; wallclock is the original
# behaviour. Each version runs in DIR/<version>/ (default
# build/examples/heat3d), leaving its code2_history.txt and
# code3_history.txt there, its output in DIR/<version>.log. Printed: the
# time per coupling step of every code of both versions, the probe
# temperatures per step (not with --quiet) and, in steps mode, how far
# the two versions are apart. Needs `make build` first; mpich, gfortran.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=steps out="$root/build/examples/heat3d" quiet=0
while (($#)); do
    case "$1" in
        --mode) mode=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --quiet) quiet=1; shift ;;
        *) echo "usage: $0 [--mode steps|wallclock] [--out DIR] [--quiet]" >&2; exit 2 ;;
    esac
done
[[ $mode == steps || $mode == wallclock ]] || { echo "$0: --mode is steps or wallclock, not '$mode'" >&2; exit 2; }
for tool in mpifort mpiexec; do
    command -v $tool >/dev/null || { echo "$0: $tool not found (Debian: apt-get install mpich libmpich-dev gfortran, or make deps)" >&2; exit 1; }
done
[[ -f "$root/build/include/tether.mod" ]] || { echo "$0: build/include/tether.mod is missing: run make build (with gfortran installed)" >&2; exit 1; }

# Build: the shared solver and reporting, then each version's codes.
fflags=(-O2 -std=f2018 -Wall)
shared="$out/obj"
mkdir -p "$shared"
(cd "$shared" && mpifort "${fflags[@]}" -c "$here/solver.f90" "$here/report.f90")
mpifort "${fflags[@]}" -J "$shared" -c "$here/file/mailbox.f90" -o "$shared/mailbox.o"
mpifort "${fflags[@]}" -I "$root/build/include" -J "$shared" -c "$here/tether/peers.f90" -o "$shared/peers.o"
for version in file tether; do
    mkdir -p "$out/$version"
    for code in code1 code2 code3; do
        if [[ $version == file ]]; then
            mpifort "${fflags[@]}" -I "$shared" "$here/file/$code.f90" "$shared"/{solver,report,mailbox}.o \
                -o "$out/$version/$code"
        else
            mpifort "${fflags[@]}" -I "$shared" -I "$root/build/include" "$here/tether/$code.f90" \
                "$shared"/{solver,report,peers}.o -o "$out/$version/$code" \
                -L "$root/build/lib" -ltether_fortran -ltether -Wl,-rpath,"$root/build/lib"
        fi
    done
done

# MPICH on loopback, as the tests run it: hydra's -iface lo where it is
# accepted, UCX kept to the loopback device.
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
mpiexec=(mpiexec)
mpiexec -iface lo -n 1 true >/dev/null 2>&1 && mpiexec=(mpiexec -iface lo)

# Both versions start the same way; the file version's programs never
# call Tether, `tether run` only launches them and prefixes their output.
run() {
    local version=$1 dir="$out/$1"
    cp "$here/s1.dat" "$here/heat.dat" "$dir/"
    rm -f "$dir"/s1.out "$dir"/s2.out "$dir"/s1.out.tmp "$dir"/s2.out.tmp
    (cd "$dir" && "$root/build/bin/tether" run --timeout 300 \
        --name code1 -n 1 ./code1 "$mode" : \
        --name code2 "${mpiexec[@]}" -n 2 ./code2 : \
        --name code3 "${mpiexec[@]}" -n 2 ./code3)
}

echo "== file-coupled version: s1.out and s2.out, in $out/file =="
run file > "$out/file.log" 2>&1 || { cat "$out/file.log"; exit 1; }
grep 'coupling steps' "$out/file.log"
echo "== Tether version: isend/irecv/waitall between the programs, in $out/tether =="
run tether > "$out/tether.log" 2>&1 || { cat "$out/tether.log"; exit 1; }
grep 'coupling steps' "$out/tether.log"

# The probe temperatures of the Tether run (each code's lines are in the
# logs), and in deterministic mode how far the file run is from them.
python3 - "$out" "$mode" "$quiet" <<'PY'
import sys
from pathlib import Path
out, mode, quiet = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
def rows(version, name):
    return [list(map(float, l.split())) for l in (out / version / name).read_text().splitlines() if not l.startswith("#")]
code2, code3 = rows("tether", "code2_history.txt"), rows("tether", "code3_history.txt")
if not quiet:
    print("== probe temperatures (Tether version) ==")
    print(f"{'step':>4} {'time':>6} {'source':>9} | code2: {'T(source)':>11} {'T(top ctr)':>11} | code3: {'T(middle)':>11} {'T(quarter)':>11}")
    for a, b in zip(code2, code3):
        print(f"{int(a[0]):4d} {a[1]:6.3f} {a[2]:9.4f} |        {a[3]:11.4e} {a[4]:11.4e} |        {b[2]:11.4e} {b[3]:11.4e}")
if mode == "steps":
    diff = max(abs(x - y) for name in ("code2_history.txt", "code3_history.txt")
               for ra, rb in zip(rows("file", name), rows("tether", name)) for x, y in zip(ra, rb))
    print(f"== {len(code2)} steps: file and Tether versions differ by at most {diff:.1e} (code2 and code3 probes) ==")
PY
