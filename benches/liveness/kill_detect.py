#!/usr/bin/env python3
"""Detection time after kill -9, per transport: how long after beta is
killed mid-transfer alpha's pending operations with it end in
TETHER_ERR_PEER_LOST (the scenario of tests/test_faults.py,
tests/c/fault_peer.c: alpha, beta and gamma launched separately, beta
killed while a send and receive of SIZE with alpha are in flight).

The kill time is taken by this script just before SIGKILL, the failure
time by alpha (CLOCK_MONOTONIC, printed as its waitall returns), so a
figure includes the signal's delivery and the kernel tearing beta down.
Prints a markdown table: median and max over --runs runs per transport
and size, for docs/RELIABILITY.md.

Usage: python3 benches/liveness/kill_detect.py [--runs 20] [--setups tcp,shm,file,hybrid]
           [--sizes 0,65536,67108864]
Needs `make build` first. file and hybrid run with TETHER_PEER_TIMEOUT=2
(the figure is bounded by it: the file transport sees a death by its
heartbeat, rewritten every second).
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from conftest import compile_c  # noqa: E402
from test_faults import KILL_SETUPS, kill_run, ok  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--setups", default=",".join(KILL_SETUPS))
    ap.add_argument("--sizes", default="0,65536,67108864")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kill-detect-") as tmp:
        tmp = Path(tmp)
        prog = str(compile_c(tmp, "fault_peer"))
        print("| transport | size | runs | median ms | max ms |")
        print("|---|---|---|---|---|")
        for setup in args.setups.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                times = []
                for run in range(args.runs):
                    where = tmp / f"{setup}-{size}-{run}"
                    where.mkdir()
                    took, outs, _ = kill_run(prog, where, setup, size)
                    ok(outs, "alpha", "kill")
                    ok(outs, "gamma", "kill")
                    times.append(took * 1000)
                print(f"| {setup} | {size} | {len(times)} | {statistics.median(times):.1f} | {max(times):.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()
