#!/usr/bin/env python3
"""Tether's ucx transport against raw UCP, same shapes, same run.

For each UCX_TLS (tcp pinned to loopback, sm), rounds alternate:
- raw: benches/ucx/ampingpong.c (8 B active-message ping-pong, half a round
  trip; 16 MiB sent with UCP_AM_SEND_FLAG_RNDV into a preallocated buffer and
  answered by a 0 B message, one in flight);
- tether: `tether bench latency --transport ucx --sizes 8` (ping-pong, half a
  round trip) and `tether bench bw --transport ucx --sizes 16M --window 1`
  (one 16 MiB send, then the receiver's ack: the same shape).

Prints a Markdown table of medians (min-max) and the ratios the issue's
targets are stated in (latency: Tether / raw, lower is better; bandwidth:
Tether / raw, higher is better). Run it on idle CPUs.

With --rma, one-sided operations instead: benches/ucx/putflush.c (an 8 B
ucp_put_nbx, ucp_get_nbx or fetching ucp_atomic_op_nbx ADD into memory
the target mapped, each followed by an endpoint flush) against `tether
bench put|get|fetch_op --transport ucx --sizes 8` with TETHER_UCX_RMA=on
(a put, get or fetch_and_op, then a flush of the target).

    python3 benches/ucx/compare.py --rounds 5
    python3 benches/ucx/compare.py --rma --rounds 5
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TETHER = ROOT / "build" / "bin" / "tether"
RAW = ROOT / "target" / "ampingpong_c"
RAW_RMA = ROOT / "target" / "putflush_c"
TLS = {"tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"}, "sm": {"UCX_TLS": "sm"}}


def build_raw(binary, source):
    source = ROOT / "benches" / "ucx" / source
    newest = max(source.stat().st_mtime, (ROOT / "benches" / "ucx" / "pair.h").stat().st_mtime)
    if not binary.exists() or binary.stat().st_mtime < newest:
        subprocess.run(["cc", "-O2", "-Wall", "-o", str(binary), str(source), "-lucp", "-lucs"], check=True)


def env_for(tls, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "UCX_"))}
    env.update(TLS[tls])
    env.update(extra)
    return env


def raw(tls, iters, bw_iters):
    out = subprocess.run([str(RAW), str(iters), str(bw_iters)], env=env_for(tls), capture_output=True,
                         text=True, check=True, timeout=600).stdout
    m = re.search(r"lat_8B_us=([\d.]+) bw_16MiB_MBps=([\d.]+)", out)
    return float(m.group(1)), float(m.group(2))


def raw_rma(tls, iters):
    out = subprocess.run([str(RAW_RMA), str(iters)], env=env_for(tls), capture_output=True, text=True,
                         check=True, timeout=600).stdout
    return {op: float(re.search(rf"{op}_8B_us=([\d.]+)", out).group(1)) for op in ("put", "get", "fadd")}


def tether(tls, mode, size, iters, extra=(), env=None):
    cmd = [str(TETHER), "bench", mode, "--transport", "ucx", "--sizes", size, "--reps", "1",
           "--baselines", "none", "--json", "--iters", str(iters), *extra]
    out = subprocess.run(cmd, env=env or env_for(tls), capture_output=True, text=True, check=True,
                         timeout=600).stdout
    series = json.loads(out)["series"][0]
    return series["points"][0]["median"]


def summary(values):
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10000, help="latency round trips")
    parser.add_argument("--bw-iters", type=int, default=20, help="16 MiB transfers")
    parser.add_argument("--tls", default="tcp,sm")
    parser.add_argument("--rma", action="store_true", help="one-sided operations (see above)")
    args = parser.parse_args()
    if args.rma:
        return compare_rma(args)
    build_raw(RAW, "ampingpong.c")
    rows = []
    for tls in args.tls.split(","):
        got = {"raw_lat": [], "raw_bw": [], "lat": [], "bw": []}
        for _ in range(args.rounds):
            lat, bw = raw(tls, args.iters, args.bw_iters)
            got["raw_lat"].append(lat)
            got["raw_bw"].append(bw)
            got["lat"].append(tether(tls, "latency", "8", args.iters))
            got["bw"].append(tether(tls, "bw", "16M", args.bw_iters, ("--window", "1")))
        med = {k: statistics.median(v) for k, v in got.items()}
        rows.append((tls, got, med["lat"] / med["raw_lat"], med["bw"] / med["raw_bw"]))
    print("| UCX_TLS | 8 B raw UCX (us) | 8 B Tether over ucx (us) | ratio | 16 MiB raw UCX (MB/s) | 16 MiB Tether over ucx (MB/s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for tls, got, lat_ratio, bw_ratio in rows:
        print(f"| {tls} | {summary(got['raw_lat'])} | {summary(got['lat'])} | {lat_ratio:.2f} | "
              f"{summary(got['raw_bw'])} | {summary(got['bw'])} | {bw_ratio:.2f} |")
    print(f"\n{args.rounds} alternating rounds, medians (min-max); "
          f"load average at the end: {os.getloadavg()[0]:.2f}")


# Tether's benchmark of each raw operation.
RMA_MODES = {"put": "put", "get": "get", "fadd": "fetch_op"}


def compare_rma(args):
    build_raw(RAW_RMA, "putflush.c")
    print("| UCX_TLS | operation, 8 B, then a flush | raw UCX (us) | Tether, TETHER_UCX_RMA=on (us) | ratio |")
    print("|---|---|---:|---:|---:|")
    for tls in args.tls.split(","):
        raw_us = {op: [] for op in RMA_MODES}
        ours = {op: [] for op in RMA_MODES}
        for _ in range(args.rounds):
            for op, us in raw_rma(tls, args.iters).items():
                raw_us[op].append(us)
            for op, mode in RMA_MODES.items():
                ours[op].append(tether(tls, mode, "8", args.iters, env=env_for(tls, TETHER_UCX_RMA="on")))
        for op, mode in RMA_MODES.items():
            ratio = statistics.median(ours[op]) / statistics.median(raw_us[op])
            print(f"| {tls} | {mode} | {summary(raw_us[op])} | {summary(ours[op])} | {ratio:.2f} |")
    print(f"\n{args.rounds} alternating rounds, medians (min-max); "
          f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
