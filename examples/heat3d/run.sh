#!/usr/bin/env bash
# The heat coupling example (examples/heat3d/README.md): builds the
# file-coupled and the Tether-coupled versions of Code-1, Code-2 and
# Code-3 with mpifort against build/, runs both, and compares them; where
# MPICH and Open MPI are both installed, also the mixed-MPI version: the
# Tether version with Code-2 built and launched by MPICH
# (mpifort.mpich, mpiexec.mpich) and Code-3 by Open MPI (mpifort.openmpi,
# mpirun.openmpi).
#
#   run.sh [--mode steps|wallclock] [--out DIR] [--quiet] [--no-mixed] [--trace DIR]
#
# --mode steps (the default) advances the source by step count, so all
# versions compute the same temperatures; wallclock is the original
# behaviour. Each version runs in DIR/<version>/ (default
# build/examples/heat3d), leaving its code2_history.txt and
# code3_history.txt there, its output in DIR/<version>.log. Printed: the
# time per coupling step of every code of every version, the MPI of each
# solver in the mixed version, the probe temperatures per step (not with
# --quiet) and, in steps mode, how far the versions are apart. Needs
# `make build` first; mpich, gfortran (and openmpi-bin, libopenmpi-dev
# for the mixed version; make deps installs them). --trace DIR records
# a trace of the Tether and mixed versions into DIR/<version>
# (TETHER_TRACE, docs/tracing.md) and prints the Tether version's
# `tether trace summary`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=steps out="$root/build/examples/heat3d" quiet=0 mixed=1 trace=
while (($#)); do
    case "$1" in
        --mode) mode=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --quiet) quiet=1; shift ;;
        --no-mixed) mixed=0; shift ;;
        --trace) trace=$2; shift 2 ;;
        *) echo "usage: $0 [--mode steps|wallclock] [--out DIR] [--quiet] [--no-mixed] [--trace DIR]" >&2; exit 2 ;;
    esac
done
# The programs run in their own directories: the trace directory is made absolute.
[[ -z $trace ]] || trace=$(mkdir -p "$trace" && cd "$trace" && pwd)
[[ $mode == steps || $mode == wallclock ]] || { echo "$0: --mode is steps or wallclock, not '$mode'" >&2; exit 2; }
for tool in mpifort mpiexec; do
    command -v $tool >/dev/null || { echo "$0: $tool not found (Debian: apt-get install mpich libmpich-dev gfortran, or make deps)" >&2; exit 1; }
done
[[ -f "$root/build/include/tether.mod" ]] || { echo "$0: build/include/tether.mod is missing: run make build (with gfortran installed)" >&2; exit 1; }

# The mixed version needs both MPIs under their own names (Debian's).
if ((mixed)); then
    for tool in mpifort.mpich mpiexec.mpich mpifort.openmpi mpicc.openmpi mpirun.openmpi; do
        if ! command -v $tool >/dev/null; then
            echo "== mixed-MPI version skipped: $tool not found (Debian: apt-get install mpich libmpich-dev openmpi-bin libopenmpi-dev, or make deps) =="
            mixed=0
            break
        fi
    done
fi

# Build: the shared solver and reporting, then each version's codes, with
# the given MPI's Fortran wrapper (a .mod of `use mpi` belongs to one MPI,
# so each MPI gets its own objects).
fflags=(-O2 -std=f2018 -Wall)
objects() {
    local fc=$1 obj=$2
    mkdir -p "$obj"
    (cd "$obj" && $fc "${fflags[@]}" -c "$here/solver.f90" "$here/report.f90")
    $fc "${fflags[@]}" -J "$obj" -c "$here/file/mailbox.f90" -o "$obj/mailbox.o"
    $fc "${fflags[@]}" -I "$root/build/include" -J "$obj" -c "$here/tether/peers.f90" -o "$obj/peers.o"
}
# Debian's mpifort.openmpi links -lmpi without naming Open MPI's library
# directory, so the linker takes /usr/lib/<arch>/libmpi.so, which Debian's
# `mpi` alternative points at MPICH's libmpich while MPICH is the default:
# the program would load both MPIs and call MPICH's. Open MPI's C wrapper
# names the directory.
link_flags() {
    local dir
    if [[ $1 == mpifort.openmpi ]]; then
        for dir in $(mpicc.openmpi --showme:libdirs); do printf '%s\n' "-L$dir"; done
    fi
}
build() {
    local version=$1 code=$2 fc=$3 obj=$4 link
    mapfile -t link < <(link_flags "$fc")
    mkdir -p "$out/$version"
    if [[ $version == file ]]; then
        $fc "${fflags[@]}" -I "$obj" "$here/file/$code.f90" "$obj"/{solver,report,mailbox}.o \
            -o "$out/$version/$code" "${link[@]}"
    else
        $fc "${fflags[@]}" -I "$obj" -I "$root/build/include" "$here/tether/$code.f90" \
            "$obj"/{solver,report,peers}.o -o "$out/$version/$code" "${link[@]}" \
            -L "$root/build/lib" -ltether_fortran -ltether -Wl,-rpath,"$root/build/lib"
    fi
}
objects mpifort "$out/obj"
for version in file tether; do
    for code in code1 code2 code3; do build $version $code mpifort "$out/obj"; done
done
if ((mixed)); then
    objects mpifort.mpich "$out/obj-mpich"
    objects mpifort.openmpi "$out/obj-openmpi"
    build mixed code1 mpifort.mpich "$out/obj-mpich"
    build mixed code2 mpifort.mpich "$out/obj-mpich"
    build mixed code3 mpifort.openmpi "$out/obj-openmpi"
fi

# MPICH on loopback, as the tests run it: hydra's -iface lo where it is
# accepted, UCX kept to the loopback device.
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
mpiexec=(mpiexec)
mpiexec -iface lo -n 1 true >/dev/null 2>&1 && mpiexec=(mpiexec -iface lo)
mpich=(mpiexec.mpich) openmpi=(mpirun.openmpi)
if ((mixed)); then
    mpiexec.mpich -iface lo -n 1 true >/dev/null 2>&1 && mpich=(mpiexec.mpich -iface lo)
    # Open MPI's mpirun refuses to start more ranks than it counts cores
    # (slots) unless told --oversubscribe, which also makes its waiting
    # ranks yield the CPU: the run's five processes share the cores. As
    # root it refuses to run at all without --allow-run-as-root.
    openmpi+=(--oversubscribe)
    if (($(id -u) == 0)); then openmpi+=(--allow-run-as-root); fi
fi

# Every version starts the same way; the file version's programs never
# call Tether, `tether run` only launches them and prefixes their output.
run() {
    local version=$1 dir="$out/$1" code2 code3
    code2=("${mpiexec[@]}") code3=("${mpiexec[@]}")
    [[ $version == mixed ]] && code2=("${mpich[@]}") code3=("${openmpi[@]}")
    cp "$here/s1.dat" "$here/heat.dat" "$dir/"
    rm -f "$dir"/s1.out "$dir"/s2.out "$dir"/s1.out.tmp "$dir"/s2.out.tmp
    local traced=()
    if [[ -n $trace && $version != file ]]; then
        rm -rf "$trace/$version"
        traced=(env "TETHER_TRACE=$trace/$version")
    fi
    (cd "$dir" && "${traced[@]}" "$root/build/bin/tether" run --timeout 300 \
        --name code1 -n 1 ./code1 "$mode" : \
        --name code2 "${code2[@]}" -n 2 ./code2 : \
        --name code3 "${code3[@]}" -n 2 ./code3)
}

shown=${out#"$PWD"/}  # DIR as given, or relative to here when below it
echo "== file-coupled version: s1.out and s2.out, in $shown/file =="
run file > "$out/file.log" 2>&1 || { cat "$out/file.log"; exit 1; }
grep 'coupling steps' "$out/file.log"
echo "== Tether version: isend/irecv/waitall between the programs, in $shown/tether =="
run tether > "$out/tether.log" 2>&1 || { cat "$out/tether.log"; exit 1; }
grep 'coupling steps' "$out/tether.log"
versions=(file tether)
if ((mixed)); then
    echo "== mixed-MPI version: Code-2 on MPICH (${mpich[*]}), Code-3 on Open MPI (${openmpi[*]}), in $shown/mixed =="
    run mixed > "$out/mixed.log" 2>&1 || { cat "$out/mixed.log"; exit 1; }
    grep -E 'heat solver:|coupling steps' "$out/mixed.log"
    versions+=(mixed)
fi

# The probe temperatures of the Tether run (each code's lines are in the
# logs), and in deterministic mode whether the other versions' histories
# are the same text (17 significant digits: the same doubles) and how far
# apart they are.
python3 - "$out" "$mode" "$quiet" "${versions[@]}" <<'PY'
import sys
from pathlib import Path
out, mode, quiet, versions = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
names = ("code2_history.txt", "code3_history.txt")
def rows(version, name):
    return [list(map(float, l.split())) for l in (out / version / name).read_text().splitlines() if not l.startswith("#")]
code2, code3 = rows("tether", "code2_history.txt"), rows("tether", "code3_history.txt")
if not quiet:
    print("== probe temperatures (Tether version) ==")
    print(f"{'step':>4} {'time':>6} {'source':>9} | code2: {'T(source)':>11} {'T(top ctr)':>11} | code3: {'T(middle)':>11} {'T(quarter)':>11}")
    for a, b in zip(code2, code3):
        print(f"{int(a[0]):4d} {a[1]:6.3f} {a[2]:9.4f} |        {a[3]:11.4e} {a[4]:11.4e} |        {b[2]:11.4e} {b[3]:11.4e}")
if mode == "steps":
    for version in (v for v in versions if v != "tether"):
        same = all((out / version / n).read_text() == (out / "tether" / n).read_text() for n in names)
        diff = max(abs(x - y) for name in names
                   for ra, rb in zip(rows(version, name), rows("tether", name)) for x, y in zip(ra, rb))
        print(f"== {len(code2)} steps: {version} and Tether versions differ by at most {diff:.1e}"
              f" ({'bit for bit the same' if same else 'NOT the same text'}; code2 and code3 probes) ==")
PY

if [[ -n $trace ]]; then
    echo "== who waited for whom in the Tether version: tether trace summary $trace/tether =="
    "$root/build/bin/tether" trace summary "$trace/tether"
fi
