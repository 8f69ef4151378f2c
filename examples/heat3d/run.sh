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
# code3_history.txt there. Needs `make build` first; mpich and gfortran.
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
fflags=(-O2 -std=f2018 -Wall -Werror)
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

echo "== file-coupled version: s1.out and s2.out in $out/file =="
run file > "$out/file.log" 2>&1 || { cat "$out/file.log"; exit 1; }
grep 'coupling steps' "$out/file.log"
echo "== Tether version: isend/irecv/waitall between the programs =="
if ((quiet)); then
    run tether > "$out/tether.log" 2>&1 || { cat "$out/tether.log"; exit 1; }
    grep 'coupling steps' "$out/tether.log"
else
    run tether 2>&1 | tee "$out/tether.log" | grep -v '^\[code1\] step'
fi
if [[ $mode == steps ]]; then
    for h in code2_history.txt code3_history.txt; do
        python3 - "$out/file/$h" "$out/tether/$h" <<'PY'
import sys
rows = [[list(map(float, l.split())) for l in open(f) if not l.startswith("#")] for f in sys.argv[1:]]
diff = max(abs(a - b) for ra, rb in zip(*rows) for a, b in zip(ra, rb))
print(f"== {sys.argv[1].rsplit('/', 1)[1]}: {len(rows[0])} steps, file and Tether versions differ by at most {diff:.1e} ==")
PY
    done
fi
