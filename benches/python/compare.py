#!/usr/bin/env python3
"""Python against C, in one invocation: ping-pong latency and streaming
bandwidth of benches/python/pingpong.py (numpy buffers) and of the C
benches/p2p/tether_pingpong.c over Tether, and, when mpi4py imports and
mpiexec exists, of pingpong.py over mpi4py and benches/p2p/mpi_pingpong.c
over MPICH (pinned to loopback TCP as in benches/compare_p2p.py).

A third measurement needs no second process: self_loop.c and
`pingpong.py --self` send 8 bytes to themselves and receive them, so the
difference is what Python adds to one Send plus one Recv, free of the
noise of two processes waking each other on a busy machine (an upper
bound of what Python adds to a ping-pong message, where only the sending
half of Send and the returning half of Recv are on the critical path).

Runs are interleaved (C, Python, MPI C, mpi4py; repeated --reps times) so
that drift in the machine's load hits all alike, each after the machine
has been quiet for a moment (benches/compare_p2p.py's gate); the tables
give medians (min-max) and the Python cost over C: microseconds added per
message (latency) and the ratio of bandwidths.

  python3 benches/python/compare.py            # full run, markdown on stdout
  python3 benches/python/compare.py --in-kernel  # Tether waits keep polling
  python3 benches/python/compare.py --quick    # seconds, for a smoke test

Builds with `make -s build` and `make -s python` (the package is installed
into this interpreter). Targets (issue 7): at most +0.5 us per 8-byte
message over C, at least 0.95x of C's bandwidth at 16 MiB.
"""

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "benches"))

import compare_p2p as p2p  # noqa: E402  (build, environment and parsing helpers)

LAT_SIZES = [8, 1024, 65536]
BW_SIZES = [1 << 20, 16 << 20]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def have_mpi4py():
    probe = subprocess.run([sys.executable, "-c", "import mpi4py.MPI"], capture_output=True)
    return probe.returncode == 0 and shutil.which("mpiexec") is not None


TETHER_ENV = {}
"""Settings for every Tether run (C and Python alike): --in-kernel."""


def commands(launcher, progs, impl, bench_args, timeout):
    py = [sys.executable, str(HERE / "pingpong.py")]
    if impl in ("C", "Python"):
        prog = [str(progs["tether"])] if impl == "C" else py
        side = [*prog, *bench_args]
        return [str(launcher), "run", "--timeout", str(timeout), "--name", "a", "-n", "1", *side,
                ":", "--name", "b", "-n", "1", *side], TETHER_ENV
    prog = [str(progs["mpi"])] if impl == "MPICH C" else [*py, "--mpi4py"]
    return ["mpiexec", *p2p.MPI_LAUNCH, *prog, *bench_args], p2p.MPI_TCP_ENV


def run(launcher, progs, impl, bench_args, timeout):
    if impl in ("C self", "Python self"):
        cmd, env = ([str(progs["self"])] if impl == "C self" else
                    [sys.executable, str(HERE / "pingpong.py"), "--self"]) + bench_args, {}
    else:
        cmd, env = commands(launcher, progs, impl, bench_args, timeout)
    r = subprocess.run(cmd, env=p2p.clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout + 30)
    res = p2p.parse(r.stdout)
    for line in r.stdout.splitlines():
        if line.startswith("self "):
            res[("self", int(line.split()[1]))] = float(line.split()[2])
    if r.returncode != 0 or not res:
        log(f"FAILED {impl}: {' '.join(cmd)} -> exit {r.returncode}\n{r.stdout[-2000:]}")
    return res


def stat(values):
    return statistics.median(values), min(values), max(values)


def cell(values, fmt):
    if not values:
        return "-"
    med, lo, hi = stat(values)
    return f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny iteration counts, 1 repetition")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5; quick 1)")
    ap.add_argument("--no-mpi", action="store_true", help="leave MPICH and mpi4py out")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--no-quiet-gate", action="store_true", help="do not wait for a quiet machine before each run")
    ap.add_argument("--in-kernel", action="store_true",
                    help="run Tether (C and Python) with TETHER_IN_KERNEL=1: waits keep polling, so a busy "
                         "machine's wake-ups do not hide what the calls cost")
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    if args.in_kernel:
        TETHER_ENV["TETHER_IN_KERNEL"] = "1"
    subprocess.run(["make", "-s", "python", f"PYTHON={sys.executable}"], cwd=ROOT, check=True)
    build_args = argparse.Namespace(tether_bin=None, tether_lib=None, no_make=False, no_mpi=args.no_mpi,
                                    build_dir=str(ROOT / "build" / "bench"))
    launcher, progs, notes = p2p.build(build_args)
    # Where p2p.build found libtether.so: build/lib after `make build`, the
    # bench directory's link to cargo's build otherwise.
    libdir = next((d for d in (ROOT / "build" / "lib", Path(build_args.build_dir) / "lib")
                   if (d / "libtether.so").exists()), ROOT / "build" / "lib")
    progs["self"] = Path(build_args.build_dir) / "self_loop"
    subprocess.run([p2p.os.environ.get("CC", "cc"), "-O2", "-Wall", "-I", str(ROOT / "include"), "-o",
                    str(progs["self"]), str(HERE / "self_loop.c"), "-L", str(libdir), "-ltether",
                    f"-Wl,-rpath,{libdir}"], check=True)
    gate = None if args.quick or args.no_quiet_gate else p2p.Runner(launcher, progs, args.timeout)
    impls = ["C", "Python"]
    if "mpi" in progs and have_mpi4py():
        impls += ["MPICH C", "mpi4py"]
    elif not args.no_mpi:
        notes.append("mpi4py over MPICH skipped: mpi4py does not import or mpiexec is missing "
                     "(`pip install mpi4py` builds it against Debian's libmpich-dev).")
    quick = ["--iters", "200", "--warmup", "20", "--bw-iters", "2", "--bw-warmup", "1"] if args.quick else []
    lat_args = ["--lat", ",".join(map(str, LAT_SIZES)), "--bw", "", *quick]
    bw_args = ["--lat", "", "--bw", ",".join(map(str, BW_SIZES)), *quick]
    self_args = ["2000" if args.quick else "200000"]
    runs = [(impl, bench) for impl in impls for bench in (lat_args, bw_args)]
    runs += [("C self", self_args), ("Python self", self_args)]
    results = {impl: {} for impl in [*impls, "C self", "Python self"]}
    for rep in range(reps):
        for impl, bench in runs:
            log(f"rep {rep + 1}/{reps}: {impl} {'latency' if bench is lat_args else 'bandwidth' if bench is bw_args else ''}")
            if gate:
                gate.wait_quiet(limit_s=20)
            for key, value in run(launcher, progs, impl, bench, args.timeout).items():
                results[impl].setdefault(key, []).append(value)

    def column(impl, key):
        return results.get(impl, {}).get(key, [])

    out = [f"Python ping-pong (numpy buffers) against C, {time.strftime('%Y-%m-%d')}, "
           f"{platform.node()} ({p2p.os.cpu_count()} CPUs), Python {platform.python_version()}, "
           f"{reps} repetitions, median (min-max).", ""]
    c_self, py_self = column("C self", ("self", 8)), column("Python self", ("self", 8))
    out += ["One process, 8 B Send+Recv to itself (us per pair):", "",
            "| C | Python | Python - C |", "|---|---|---|",
            f"| {cell(c_self, '{:.3f}')} | {cell(py_self, '{:.3f}')} | "
            + (f"{statistics.median(py_self) - statistics.median(c_self):+.3f} |" if c_self and py_self else "- |"),
            "", "Ping-pong, half round trip" + (" (Tether with TETHER_IN_KERNEL=1)" if args.in_kernel else "")
            + ":", ""]
    out += ["| size | C (us) | Python (us) | Python - C (us) |" + (" MPICH C (us) | mpi4py (us) | mpi4py - MPICH (us) |" if len(impls) > 2 else ""),
            "|---|---|---|---|" + ("---|---|---|" if len(impls) > 2 else "")]
    for size in LAT_SIZES:
        key = ("latency", size)
        row = [p2p.human(size), cell(column("C", key), "{:.2f}"), cell(column("Python", key), "{:.2f}")]
        c, py = column("C", key), column("Python", key)
        row.append(f"{statistics.median(py) - statistics.median(c):+.2f}" if c and py else "-")
        if len(impls) > 2:
            m, m4 = column("MPICH C", key), column("mpi4py", key)
            row += [cell(m, "{:.2f}"), cell(m4, "{:.2f}"),
                    f"{statistics.median(m4) - statistics.median(m):+.2f}" if m and m4 else "-"]
        out.append("| " + " | ".join(row) + " |")
    out += ["", "| size | C (MB/s) | Python (MB/s) | Python / C |" + (" MPICH C (MB/s) | mpi4py (MB/s) | mpi4py / MPICH |" if len(impls) > 2 else ""),
            "|---|---|---|---|" + ("---|---|---|" if len(impls) > 2 else "")]
    for size in BW_SIZES:
        key = ("bw", size)
        c, py = column("C", key), column("Python", key)
        row = [p2p.human(size), cell(c, "{:.0f}"), cell(py, "{:.0f}"),
               f"{statistics.median(py) / statistics.median(c):.3f}" if c and py else "-"]
        if len(impls) > 2:
            m, m4 = column("MPICH C", key), column("mpi4py", key)
            row += [cell(m, "{:.0f}"), cell(m4, "{:.0f}"),
                    f"{statistics.median(m4) / statistics.median(m):.3f}" if m and m4 else "-"]
        out.append("| " + " | ".join(row) + " |")
    out += [""] + [f"- {n}" for n in notes]
    print("\n".join(out))


if __name__ == "__main__":
    main()
