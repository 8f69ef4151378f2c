#!/usr/bin/env python3
"""The hint paper's experiment on Tether (benches/hints/kernel_shift.c):
a 64-byte all-to-all among all ranks, then a shift to the right
neighbour (100 B to 1 MiB), three rounds, with and without IN_KERNEL
around the shift, and with IN_KERNEL and TETHER_MAX_LINKS=<cap> (the
cap closes TCP connections and gives shared-memory rings' pages back),
for growing process counts on
this machine (one program, `tether run -n N`).

Prints per transport, N and configuration: the median over processes of
their memory (peak resident + kernel socket queues + touched shared
rings, KiB), of their links at the end and at their peak, and of their
retires, and rank 0's shift time per iteration at 100 B and 1 MiB.

    python3 benches/hints/kernel_shift.py [--sizes 16,32,64] [--transports shm,tcp] [--cap 4] [--programs 1]
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TETHER = ROOT / "build" / "bin" / "tether"


def run(prog, n, transport, hint, cap, programs=1):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(TETHER_TRANSPORTS=transport, HINT="1" if hint else "0", TETHER_MAX_LINKS=str(cap))
    # N processes as `programs` programs of N / programs each (the
    # shift and the all-to-all run over the universe, across them).
    command = [str(TETHER), "run"]
    for p in range(programs):
        command += ([":"] if p else []) + ["--name", f"p{p}", "-n", str(n // programs), str(prog)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200, check=True).stdout
    memory = [tuple(map(int, m)) for m in
              re.findall(r"memory_kib (\d+) links (\d+) links_peak (\d+) retires (\d+)", out)]
    shift = dict((int(s), float(t)) for s, t in re.findall(r"shift (\d+) ([0-9.]+)", out))
    assert len(memory) == n, out
    return memory, shift


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,32,64")
    parser.add_argument("--transports", default="shm,tcp")
    parser.add_argument("--cap", type=int, default=4, help="TETHER_MAX_LINKS of the capped runs")
    parser.add_argument("--programs", type=int, default=1, help="split the N processes into this many programs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "kernel_shift"
        lib = ROOT / "build" / "lib"
        subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), str(Path(__file__).with_name("kernel_shift.c")),
                        "-o", str(prog), "-L", str(lib), "-ltether", f"-Wl,-rpath,{lib}"], check=True)
        print("| transport | N | IN_KERNEL | MAX_LINKS | memory per process, KiB | links | links at peak | retires "
              "| shift 100 B, us | shift 1 MiB, us |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for transport in args.transports.split(","):
            for n in map(int, args.sizes.split(",")):
                configs = [(False, 0), (True, 0), (True, args.cap)]
                for hint, cap in configs:
                    memory, shift = run(prog, n, transport, hint, cap, args.programs)
                    kib, links, peak, retires = (statistics.median(m[i] for m in memory) for i in range(4))
                    print(f"| {transport} | {n} | {'1' if hint else 'unset'} | {cap or 'unset'} | {kib:,.0f} | "
                          f"{links:.0f} | {peak:.0f} | {retires:.0f} | "
                          f"{shift.get(100, float('nan')):.2f} | {shift.get(1 << 20, float('nan')):.1f} |", flush=True)


if __name__ == "__main__":
    main()
