#!/usr/bin/env python3
"""Tether fields against ADIOS2 SST, the staging engine users pick today,
in one run on this machine.

Streams a ROWS x COLS array of doubles (default 1500 x 1400, 16.8 MB, the
size the fields issue quotes for SST) from one process to another for
STEPS steps, alternating SST (the PyPI `adios2` wheel, WAN socket data
plane) and a Tether field (`tether run`, TETHER_TRANSPORTS as given, tcp
by default so both go through sockets) with blocking put/get and with
iput/iget (two steps in flight, the array sent as it lies), and prints
the medians and the ratios. The wheel is serial, so one writer and one reader: SST without MPI
cannot join several writer processes into one stream. Needs
`pip install adios2` (make deps-bench); without it, says so and exits 0.

Usage: python3 benches/fields/sst_compare.py [--rows R --cols C --steps N --repeats K --transport tcp|shm]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAIR = Path(__file__).resolve().parent / "stream_pair.py"


def run_sst(rows, cols, steps):
    with tempfile.TemporaryDirectory() as tmp:
        args = [str(rows), str(cols), str(steps)]
        writer = subprocess.Popen([sys.executable, str(PAIR), "sst", "put", *args], cwd=tmp,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        reader = subprocess.run([sys.executable, str(PAIR), "sst", "get", *args], cwd=tmp,
                                capture_output=True, text=True, timeout=600)
        writer.wait(timeout=600)
    return parse(reader.stdout + reader.stderr, "sst")


def run_tether(rows, cols, steps, transport, engine="tether"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["TETHER_TRANSPORTS"] = transport
    args = [str(rows), str(cols), str(steps)]
    proc = subprocess.run([str(ROOT / "build" / "bin" / "tether"), "run", "--timeout", "600",
                           "--name", "put", "-n", "1", sys.executable, str(PAIR), engine, "put", *args, ":",
                           "--name", "get", "-n", "1", sys.executable, str(PAIR), engine, "get", *args],
                          capture_output=True, text=True, env=env, timeout=660)
    return parse(proc.stdout + proc.stderr, engine)


def parse(text, engine):
    match = re.search(rf"{engine} \d+ steps ([\d.]+)", text)
    if not match:
        sys.exit(f"{engine} run failed:\n{text}")
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--cols", type=int, default=1400)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--transport", default="tcp")
    a = parser.parse_args()
    try:
        import adios2  # noqa: F401
    except ImportError:
        print("adios2 is not installed (pip install adios2, or make deps-bench): nothing to compare")
        return
    sst, tether, tether_nb = [], [], []
    for _ in range(a.repeats):
        sst.append(run_sst(a.rows, a.cols, a.steps))
        tether.append(run_tether(a.rows, a.cols, a.steps, a.transport))
        tether_nb.append(run_tether(a.rows, a.cols, a.steps, a.transport, "tether-nb"))
    mb = a.rows * a.cols * 8 / 1e6
    s, t, tn = statistics.median(sst), statistics.median(tether), statistics.median(tether_nb)
    print(f"{a.rows} x {a.cols} doubles ({mb:.1f} MB a step), 1 writer -> 1 reader, {a.steps} steps, "
          f"median of {a.repeats} (min-max)\n")
    print("| engine | GB/s |")
    print("|---|---|")
    print(f"| ADIOS2 SST (WAN sockets, QueueLimit 2) | {s:.2f} ({min(sst):.2f}-{max(sst):.2f}) |")
    print(f"| Tether field put/get ({a.transport}, FIELD_QUEUE 2) | {t:.2f} ({min(tether):.2f}-{max(tether):.2f}) |")
    print(f"| Tether field iput/iget, two in flight ({a.transport}) | {tn:.2f} "
          f"({min(tether_nb):.2f}-{max(tether_nb):.2f}) |")
    print(f"\nTether / SST: {t / s:.1f}x (put/get), {tn / s:.1f}x (iput/iget)")


if __name__ == "__main__":
    main()
