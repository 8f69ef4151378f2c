#!/usr/bin/env python3
"""Start-up at scale: the wall time of `tether run -n N` of a program
that joins, passes one barrier and finalizes (benches/hints/startup.c),
one program of N processes on this machine, per transport.

    python3 benches/hints/startup.py [--sizes 64,256,1024] [--transports tcp,shm]
"""

import argparse
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TETHER = ROOT / "build" / "bin" / "tether"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--transports", default="tcp,shm")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "startup"
        lib = ROOT / "build" / "lib"
        subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), str(Path(__file__).with_name("startup.c")),
                        "-o", str(prog), "-L", str(lib), "-ltether", f"-Wl,-rpath,{lib}"], check=True)
        print("| transport | N | wall time of tether run, s |")
        print("|---|---:|---:|")
        for transport in args.transports.split(","):
            for n in map(int, args.sizes.split(",")):
                env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
                env.update(TETHER_TRANSPORTS=transport, TETHER_CONNECT_TIMEOUT="600")
                start = time.monotonic()
                done = subprocess.run([str(TETHER), "run", "--name", "p", "-n", str(n), str(prog)], env=env,
                                      capture_output=True, text=True, timeout=1800)
                took = time.monotonic() - start
                status = "" if done.returncode == 0 else f" (failed: {done.stderr.strip()[-200:]})"
                print(f"| {transport} | {n} | {took:.2f}{status} |", flush=True)


if __name__ == "__main__":
    main()
