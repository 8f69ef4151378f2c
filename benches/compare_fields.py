#!/usr/bin/env python3
"""Field throughput against point-to-point of the same bytes, in one run.

Builds benches/fields/field_bench.c and runs it through `tether run` on
shm and tcp: a ROWS x COLS array of doubles moves every step from 4
producer ranks (block rows) to 3 consumer ranks (block-cyclic columns,
block 64), then the same bytes move between the same rank pairs as
contiguous isend/irecv messages. Steps go by blocking put/get and, in
separate runs, by iput/iget with two steps in flight. Repeats alternate
the transports and modes; the report gives the median GB/s of each and
their ratio (field / p2p).

Usage:
  python3 benches/compare_fields.py [--rows 8192 --cols 8192] [--steps 5] [--repeats 3]
  python3 benches/compare_fields.py --quick      # 1024 x 1024, 1 repeat: a smoke run
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "bench-fields"
LINE = re.compile(r"field ([\d.]+) p2p ([\d.]+) ratio ([\d.]+) bytes (\d+) create_ms ([\d.]+)")


def build(no_make):
    OUT.mkdir(parents=True, exist_ok=True)
    if not no_make:
        subprocess.run(["make", "-s", "build"], cwd=ROOT, check=True)
    exe = OUT / "field_bench"
    lib = ROOT / "build" / "lib"
    subprocess.run(["cc", "-O2", "-I", str(ROOT / "include"), str(ROOT / "benches" / "fields" / "field_bench.c"),
                    "-o", str(exe), "-L", str(lib), "-ltether", f"-Wl,-rpath,{lib}"], check=True)
    return exe


def run(exe, transport, rows, cols, steps, mode=""):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["TETHER_TRANSPORTS"] = transport
    args = [str(exe), str(rows), str(cols), str(steps), "64", *([mode] if mode else [])]
    proc = subprocess.run([str(ROOT / "build" / "bin" / "tether"), "run", "--timeout", "600",
                           "--name", "prod", "-n", "4", *args, ":", "--name", "cons", "-n", "3", *args],
                          capture_output=True, text=True, env=env, timeout=660)
    match = LINE.search(proc.stdout)
    if proc.returncode != 0 or not match:
        sys.exit(f"field_bench failed on {transport}:\n{proc.stdout}{proc.stderr}")
    field, p2p, _, nbytes, create = match.groups()
    return float(field), float(p2p), int(nbytes), float(create)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-make", action="store_true")
    a = parser.parse_args()
    if a.quick:
        a.rows, a.cols, a.steps, a.repeats = 1024, 1024, 2, 1
    exe = build(a.no_make)
    results = {(t, m): [] for t in ("shm", "tcp") for m in ("", "nb")}
    for _ in range(a.repeats):
        for (transport, mode) in results:
            results[(transport, mode)].append(run(exe, transport, a.rows, a.cols, a.steps, mode))
    mib = a.rows * a.cols * 8 / 2**20
    print(f"{a.rows} x {a.cols} doubles ({mib:.0f} MiB a step), 4 producers (block rows) -> "
          f"3 consumers (block-cyclic columns, block 64), {a.steps} steps, median of {a.repeats}\n")
    print("| transport | steps by | field GB/s | p2p GB/s (same bytes, same pairs) | field / p2p | field_create ms |")
    print("|---|---|---|---|---|---|")
    for (transport, mode), runs in results.items():
        field = statistics.median(r[0] for r in runs)
        p2p = statistics.median(r[1] for r in runs)
        create = statistics.median(r[3] for r in runs)
        how = "iput/iget" if mode else "put/get"
        print(f"| {transport} | {how} | {field:.2f} | {p2p:.2f} | {field / p2p:.2f}x | {create:.1f} |")


if __name__ == "__main__":
    main()
