#!/usr/bin/env python3
"""The kernel's time under the link cap against all links dedicated (the
hint paper's second figure, issue 25's target: within 5%): the shift of
benches/hints/kernel_shift.c with IN_KERNEL around it, run with
TETHER_MAX_LINKS=0 and =<cap> alternately, many rounds (N processes on
a small machine move the times by tens of percent from run to run), and
the medians of rank 0's time per shift compared.

    python3 benches/hints/kernel_time.py [-n 16] [--transport shm] [--rounds 41] [--cap 4]
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


def shift_times(prog, n, transport, cap):
    """{bytes: us per shift} of one run (rank 0's, last round)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update(TETHER_TRANSPORTS=transport, HINT="1", TETHER_MAX_LINKS=str(cap))
    out = subprocess.run([str(TETHER), "run", "--name", "p", "-n", str(n), str(prog)], env=env,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return {int(size): float(us) for size, us in re.findall(r"shift (\d+) ([\d.]+)", out)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=16)
    parser.add_argument("--transport", default="shm")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--cap", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "kernel_shift"
        lib = ROOT / "build" / "lib"
        subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), "-I", str(Path(__file__).parent),
                        str(Path(__file__).with_name("kernel_shift.c")), "-o", str(prog), "-L", str(lib),
                        "-ltether", f"-Wl,-rpath,{lib}"], check=True)
        times = {0: {}, args.cap: {}}
        for _ in range(args.rounds):
            for cap in times:
                for size, us in shift_times(prog, args.n, args.transport, cap).items():
                    times[cap].setdefault(size, []).append(us)
    print(f"| shift | all dedicated, us | MAX_LINKS={args.cap}, us | ratio |")
    print("|---:|---:|---:|---:|")
    for size in sorted(times[0]):
        dedicated, capped = statistics.median(times[0][size]), statistics.median(times[args.cap][size])
        print(f"| {size} B | {dedicated:.2f} | {capped:.2f} | {capped / dedicated:.3f} |")
    print(f"({args.transport}, {args.n} processes, medians of {args.rounds} alternating runs)")


if __name__ == "__main__":
    main()
