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
  gups          random remote XORs (accumulate BXOR) on every process's
                table, batches of 1024 then a flush (updates/s, all processes;
                benches/rma/gups.c)
  halo_isend / halo_put  a 2-D heat step with its halo exchanged by
                isend/irecv or by put + fence (us per step, 1024 x 1024;
                benches/rma/halo.c, Tether only)

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
    for prog in ("tether_rma", "gups", "halo"):
        progs[prog] = out / prog
        subprocess.run([*cc, str(SRC / f"{prog}.c"), "-o", str(progs[prog]), "-L", str(lib),
                        "-ltether", "-lm", f"-Wl,-rpath,{lib}"], check=True)
    for name, compiler in (("mpich", "mpicc.mpich"), ("openmpi", "mpicc.openmpi")):
        if shutil.which(compiler):
            progs[name] = out / f"{name}_rma"
            subprocess.run([compiler, "-O2", str(SRC / "mpi_rma.c"), "-o", str(progs[name])], check=True)
            progs[f"{name}_gups"] = out / f"{name}_gups"
            subprocess.run([compiler, "-O2", "-DUSE_MPI", str(SRC / "gups.c"), "-o", str(progs[f"{name}_gups"])],
                           check=True)
        else:
            notes.append(f"{name} skipped: {compiler} not found")
    return progs, notes


def setups(progs, iters):
    """Each set-up: a list of (command, environment), run one after the other."""
    def tether(transport):
        env = {"TETHER_TRANSPORTS": transport}
        two = lambda prog, *args: [str(TETHER), "run", "--name", "a", "-n", "1", str(progs[prog]), *args,
                                   ":", "--name", "b", "-n", "1", str(progs[prog]), *args]
        return [(two("tether_rma", iters), env), (two("gups"), env), (two("halo", "1024", "200"), env)]

    out = {"Tether shm": tether("shm"), "Tether tcp": tether("tcp")}
    if "mpich" in progs:
        launch = lambda prog, *args: ["mpiexec.mpich", "-n", "2", "-iface", "lo", str(progs[prog]), *args]
        out["MPICH shm"] = [(launch("mpich", iters), {}), (launch("mpich_gups"), {})]
        out["MPICH tcp"] = [(launch("mpich", iters), MPICH_TCP), (launch("mpich_gups"), MPICH_TCP)]
    if "openmpi" in progs:
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        launch = lambda prog, *args: ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "2",
                                      str(progs[prog]), *args]
        out["Open MPI"] = [(launch("openmpi", iters), env), (launch("openmpi_gups"), env)]
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
            for name, runs in plan.items():
                for cmd, env in runs:
                    found, error = run_once(cmd, env)
                    if found is None:
                        notes.append(f"{name}: a run failed: {error!r}")
                        continue
                    for key, value in found.items():
                        data[name].setdefault(key, []).append(value)
    keys = [("pingpong_rtt", 8), ("put_flush", 8), ("get_flush", 8), ("fetch_op", 8), ("am_rtt", 8),
            ("put_bw", 1 << 20), ("put_bw", 16 << 20), ("gups", 2), ("halo_isend", 1024), ("halo_put", 1024)]
    names = list(plan)
    print("| measurement | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for kind, size in keys:
        unit = {"put_bw": "MB/s", "gups": "updates/s"}.get(kind, "us")
        label = {"put_bw": f"{kind} {size >> 20} MiB (MB/s)", "gups": f"gups, {size} processes (updates/s)",
                 "halo_isend": f"{kind} {size}x{size} (us/step)", "halo_put": f"{kind} {size}x{size} (us/step)"
                 }.get(kind, f"{kind} {size} B")
        print(f"| {label} | " + " | ".join(cell(data[n].get((kind, size)), unit) for n in names) + " |")
    for note in notes:
        print(f"\nNote: {note}")


if __name__ == "__main__":
    main()
