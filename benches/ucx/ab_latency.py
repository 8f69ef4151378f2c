#!/usr/bin/env python3
"""8 B ping-pong over the ucx transport: this checkout's build against
another build (a clone at an older commit, built with `make build`) and
raw UCX (benches/ucx/ampingpong.c, built by compare.py), alternating, in
one run. Prints medians (min-max) in us and the ratios to raw UCX.

    python3 benches/ucx/ab_latency.py --other /path/to/old/checkout --rounds 7
"""

import argparse
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TLS = {"tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"}, "sm": {"UCX_TLS": "sm"}}


def env_for(tls):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "UCX_"))}
    env.update(TLS[tls])
    return env


def tether(root, tls, iters):
    cmd = [str(Path(root) / "build" / "bin" / "tether"), "bench", "latency", "--transport", "ucx",
           "--sizes", "8", "--reps", "1", "--baselines", "none", "--json", "--iters", str(iters)]
    out = subprocess.run(cmd, env=env_for(tls), capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out)["series"][0]["points"][0]["median"]


def raw(tls, iters):
    out = subprocess.run([str(ROOT / "target" / "ampingpong_c"), str(iters), "2"], env=env_for(tls),
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return float(re.search(r"lat_8B_us=([\d.]+)", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", required=True, help="the other checkout, built")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10000)
    parser.add_argument("--tls", default="sm,tcp")
    args = parser.parse_args()
    for tls in args.tls.split(","):
        got = {"raw": [], "this": [], "other": []}
        for _ in range(args.rounds):
            got["raw"].append(raw(tls, args.iters))
            got["this"].append(tether(ROOT, tls, args.iters))
            got["other"].append(tether(args.other, tls, args.iters))
        med = {k: statistics.median(v) for k, v in got.items()}
        cells = " | ".join(f"{med[k]:.3f} ({min(v):.3f}-{max(v):.3f})" for k, v in got.items())
        print(f"| {tls} | {cells} | {med['other'] / med['raw']:.2f} | {med['this'] / med['raw']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
