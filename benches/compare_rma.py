#!/usr/bin/env python3
"""One-sided operations and active messages: Tether against MPICH's and
Open MPI's one-sided calls, two processes on this machine, in one run.

Builds benches/rma/tether_rma.c and benches/rma/mpi_rma.c (with mpicc.mpich
and mpicc.openmpi where present), runs each set-up --reps times in turn
(interleaved, so that drift in the machine's load hits all alike), and
prints a markdown table of medians (min-max) per measurement:

  pingpong_rtt  two-sided round trip, 8 B (us)
  put_flush     put of 8 B then flush of the target (us)
  get_flush     get of 8 B then flush (us)
  fetch_op      fetch_and_op INT64 SUM then flush (us)
  am_rtt        active message answered from its handler, 8 B (Tether only)
  put_bw        a window of 16 puts then one flush, 1 MiB and 16 MiB (MB/s)

Set-ups: Tether over shm and over tcp; MPICH over its default (shared
memory) and over loopback TCP; Open MPI over its default. An MPI that is
missing is skipped with a note, never faked.

    python3 benches/compare_rma.py [--reps 3] [--iters 20000]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "benches" / "rma"
TETHER = ROOT / "build" / "bin" / "tether"
LINE = re.compile(r"^(?:\[[^\]]*\]\s*)?(\w+)\s+(\d+)\s+([0-9.]+)\s*$")
MPICH_TCP = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo", "MPIR_CVAR_NOLOCAL": "1"}


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(extra)
    return env


def build(out):
    progs, notes = {}, []
    cc = ["cc", "-O2", "-std=c11", "-I", str(ROOT / "include")]
    lib = ROOT / "build" / "lib"
    progs["tether"] = out / "tether_rma"
    subprocess.run([*cc, str(SRC / "tether_rma.c"), "-o", str(progs["tether"]), "-L", str(lib),
                    "-ltether", f"-Wl,-rpath,{lib}"], check=True)
    for name, compiler in (("mpich", "mpicc.mpich"), ("openmpi", "mpicc.openmpi")):
        if shutil.which(compiler):
            progs[name] = out / f"{name}_rma"
            subprocess.run([compiler, "-O2", str(SRC / "mpi_rma.c"), "-o", str(progs[name])], check=True)
        else:
            notes.append(f"{name} skipped: {compiler} not found")
    return progs, notes


def setups(progs, iters):
    tether = lambda transport: ([str(TETHER), "run", "--name", "rma", "-n", "2", str(progs["tether"]), iters],
                                {"TETHER_TRANSPORTS": transport})
    out = {"Tether shm": tether("shm"), "Tether tcp": tether("tcp")}
    if "mpich" in progs:
        launch = ["mpiexec.mpich", "-n", "2", "-iface", "lo", str(progs["mpich"]), iters]
        out["MPICH shm"] = (launch, {})
        out["MPICH tcp"] = (launch, MPICH_TCP)
    if "openmpi" in progs:
        out["Open MPI"] = (["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "2",
                            str(progs["openmpi"]), iters], {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                                                            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return out


def run_once(cmd, env):
    proc = subprocess.run(cmd, env=clean_env(env), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return None, (proc.stdout + proc.stderr)[-400:]
    found = {}
    for line in proc.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            found[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return found, None


def cell(values, unit):
    if not values:
        return "-"
    med = statistics.median(values)
    spread = f" ({min(values):.3g}-{max(values):.3g})" if len(values) > 1 else ""
    return f"{med:,.3g} {unit}{spread}" if unit == "us" else f"{med:,.0f}{spread}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", default="20000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        progs, notes = build(Path(tmp))
        plan = setups(progs, args.iters)
        data = {name: {} for name in plan}
        for _ in range(args.reps):
            for name, (cmd, env) in plan.items():
                found, error = run_once(cmd, env)
                if found is None:
                    notes.append(f"{name}: a run failed: {error!r}")
                    continue
                for key, value in found.items():
                    data[name].setdefault(key, []).append(value)
    keys = [("pingpong_rtt", 8), ("put_flush", 8), ("get_flush", 8), ("fetch_op", 8), ("am_rtt", 8),
            ("put_bw", 1 << 20), ("put_bw", 16 << 20)]
    names = list(plan)
    print("| measurement | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for kind, size in keys:
        unit = "MB/s" if kind == "put_bw" else "us"
        label = f"{kind} {size >> 20} MiB (MB/s)" if kind == "put_bw" else f"{kind} {size} B"
        print(f"| {label} | " + " | ".join(cell(data[n].get((kind, size)), unit) for n in names) + " |")
    for note in notes:
        print(f"\nNote: {note}")


if __name__ == "__main__":
    main()
