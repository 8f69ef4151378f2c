#!/usr/bin/env python3
"""What authentication costs: the first round trip between two processes
(connection and handshake included) and the round trip on the open link,
with and without a key, over TCP, interleaved run by run so that drift in
the machine's load hits both alike.

Builds benches/auth/first_contact.c against build/lib and runs two
separately launched processes per run (a fresh rendezvous directory each
time). Prints a markdown table of medians (min-max) in microseconds.

    python3 benches/auth/compare.py [--runs 20] [--iters 2000]
"""

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
KEY = "0123456789abcdef0123456789abcdef"


def run_pair(prog, rdv, key, iters):
    procs = []
    for name in ("a", "b"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        env.update(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAM=name, TETHER_PROGRAMS="a,b",
                   TETHER_TRANSPORTS="tcp")
        if key:
            env["TETHER_KEY"] = KEY
        procs.append(subprocess.Popen([str(prog), str(iters)], env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a run failed: {outs}")
    values = dict(line.split() for line in outs[0].splitlines() if line.strip())
    return float(values["first_rtt_us"]), float(values["rtt_us"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        prog = tmp / "first_contact"
        lib = ROOT / "build" / "lib"
        subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), str(ROOT / "benches/auth/first_contact.c"),
                        "-o", str(prog), "-L", str(lib), "-ltether", f"-Wl,-rpath,{lib}"], check=True)
        results = {False: [], True: []}
        for n in range(args.runs):
            for key in (False, True):
                results[key].append(run_pair(prog, tmp / f"rdv-{n}-{int(key)}", key, args.iters))

    def cell(values):
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    print("| TCP, 2 processes | no key | key | key - no key |")
    print("|---|---:|---:|---:|")
    for i, what in enumerate(("first round trip (connect + handshake), us", "round trip on the open link, us")):
        plain = [r[i] for r in results[False]]
        keyed = [r[i] for r in results[True]]
        delta = statistics.median(keyed) - statistics.median(plain)
        print(f"| {what} | {cell(plain)} | {cell(keyed)} | {delta:+.2f} |")


if __name__ == "__main__":
    main()
