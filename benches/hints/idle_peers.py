#!/usr/bin/env python3
"""What an idle peer costs a process: universes of N processes on this
machine (one program, `tether run -n N`), each process exchanging only
with its two neighbours, report their resident memory and their links
(benches/hints/idle_peers.c). The peers a process never contacts grow N
but not its links; the growth of its memory per extra peer is what an
idle known peer costs (issue 25's bound: 1 KiB).

    python3 benches/hints/idle_peers.py [--sizes 4,16,64] [--transports shm,tcp] [--runs 3]

Prints, per transport and N, the median over processes and runs of
VmRSS and of the links' bytes, and the growth per extra peer between the
smallest and the largest N.
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
LINE = re.compile(r"rss_kib (\d+) links (\d+) link_bytes (\d+)")


def run(prog, n, transport):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["TETHER_TRANSPORTS"] = transport
    out = subprocess.run([str(TETHER), "run", "--name", "p", "-n", str(n), str(prog)], env=env,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return [tuple(map(int, m.groups())) for m in LINE.finditer(out)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,16,64")
    parser.add_argument("--transports", default="shm,tcp")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "idle_peers"
        lib = ROOT / "build" / "lib"
        subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), str(Path(__file__).with_name("idle_peers.c")),
                        "-o", str(prog), "-L", str(lib), "-ltether", f"-Wl,-rpath,{lib}"], check=True)
        print("| transport | N | links | VmRSS KiB | links' bytes KiB |")
        print("|---|---:|---:|---:|---:|")
        for transport in args.transports.split(","):
            medians = {}
            for n in sizes:
                rows = [row for _ in range(args.runs) for row in run(prog, n, transport)]
                assert len(rows) == n * args.runs, rows
                rss = statistics.median(r[0] for r in rows)
                links = statistics.median(r[1] for r in rows)
                held = statistics.median(r[2] for r in rows) / 1024
                medians[n] = rss
                print(f"| {transport} | {n} | {links:.0f} | {rss:,.0f} | {held:,.0f} |")
            lo, hi = sizes[0], sizes[-1]
            per_peer = (medians[hi] - medians[lo]) / (hi - lo)
            print(f"| {transport} | growth per extra peer, N = {lo} to {hi} | | {per_peer:.2f} KiB | |")


if __name__ == "__main__":
    main()
