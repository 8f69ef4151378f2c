#!/usr/bin/env python3
"""Rails against their raw baseline, on the rail test bed and on loopback.

On the bed (tests/railbed.py: two network namespaces joined by
rate-limited veth pairs), for each set of rail rates: the bed's own raw
figures (raw_stream.c: one plain stream per rail, and all rails striped
round_robin and least_used), then Tether's bandwidth (benches/p2p/
tether_pingpong.c, one message in flight: --window 1) with TETHER_RAILS=1
and with every rail under each policy, and Tether's 8-byte half round
trip with 1 rail and with all of them. On loopback, where a core and not a
link is the limit: Tether's 8-byte latency and 16 MiB bandwidth with 1 and
2 rails, alternating. Every figure is the median of the rounds; ratios
are taken within the run.

    python3 benches/rails/compare.py [--rounds 3] [--sizes 1M,16M,64M,256M]
                                     [--skip-bed] [--skip-loopback]

Needs root for the bed (it says why it skips otherwise) and a built tree
(`make build`).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import railbed  # noqa: E402

BUILD = ROOT / "build"
PINGPONG_SRC = ROOT / "benches" / "p2p" / "tether_pingpong.c"


def size_of(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def build_pingpong():
    out = BUILD / "rails" / "tether_pingpong"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.stat().st_mtime < PINGPONG_SRC.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-I", str(ROOT / "include"), "-I", str(PINGPONG_SRC.parent),
                        str(PINGPONG_SRC), "-L", str(BUILD / "lib"), "-ltether",
                        f"-Wl,-rpath,{BUILD / 'lib'}", "-o", str(out)], check=True)
    return out


def tether_env(**settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update({k: str(v) for k, v in settings.items()})
    return env


def parse(out):
    """tether_pingpong's lines: latency <bytes> <us>, bw <bytes> <MB/s>."""
    figures = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] in ("latency", "bw"):
            figures[(words[0], int(words[1]))] = float(words[2])
    return figures


def bed_tether(bed, exe, args, rails, policy, timeout=300):
    """tether_pingpong ARGS as program left (side a, rank 0) and right
    (side b) over `rails` rails of the bed."""
    with tempfile.TemporaryDirectory() as rdv:
        procs = []
        for side, name in (("a", "left"), ("b", "right")):
            env = tether_env(TETHER_TRANSPORTS="tcp", TETHER_RAILS=rails, TETHER_RAIL_POLICY=policy,
                             TETHER_TCP_INTERFACE=",".join(bed.addrs(side)[:rails]),
                             TETHER_RENDEZVOUS=rdv, TETHER_PROGRAMS="left,right", TETHER_PROGRAM=name)
            procs.append(bed.popen(side, [str(exe), *args], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=timeout) for p in procs]
        for p, (out, err) in zip(procs, outs):
            if p.returncode != 0:
                raise RuntimeError(f"tether_pingpong exited {p.returncode}: {err[-2000:]}")
        return parse(outs[0][0])


def median(values):
    return statistics.median(values) if values else float("nan")


def fmt(values, digits=1):
    if not values:
        return "-"
    return f"{median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def bed_round(bed, exe, sizes, policies, results):
    """One round on `bed`: raw figures, then Tether's."""
    nbytes = max(sizes)
    for rail in range(1, bed.rails + 1):
        r = railbed.raw_stream(bed, nbytes, rails=[rail], timeout=120)
        results.setdefault(("raw", f"rail {rail}"), []).append(r["MB/s"])
    for policy in policies:
        r = railbed.raw_stream(bed, nbytes, policy=policy, timeout=120)
        results.setdefault(("raw", f"{bed.rails} rails {policy}"), []).append(r["MB/s"])
    bw = ["--lat", "", "--bw", ",".join(map(str, sizes)), "--window", "1",
          "--bw-iters", "3", "--bw-warmup", "1"]
    lat = ["--lat", "8", "--bw", "", "--iters", "2000", "--warmup", "200"]
    setups = [(1, "round_robin")] + [(bed.rails, p) for p in policies]
    for rails, policy in setups:
        figures = bed_tether(bed, exe, bw, rails, policy)
        for size in sizes:
            results.setdefault(("tether", rails, policy, size), []).append(figures[("bw", size)])
    for rails in (1, bed.rails):
        figures = bed_tether(bed, exe, lat, rails, "round_robin")
        results.setdefault(("lat", rails), []).append(figures[("latency", 8)])


def bed_report(rates, sizes, policies, results):
    rails = len(rates)
    print(f"\n### Bed: {rails} rails of {' + '.join(map(str, rates))} Mbit/s\n")
    print("Raw (raw_stream.c, one message of the largest size, MB/s):\n")
    print("| stream | MB/s |")
    print("|---|---:|")
    for key, values in sorted((k, v) for k, v in results.items() if k[0] == "raw"):
        print(f"| {key[1]} | {fmt(values)} |")
    one_raw = median(results[("raw", "rail 1")])
    print(f"\nTether (tether_pingpong --window 1, MB/s; ratio to 1 rail, and to raw's rail 1 = {one_raw:.1f}):\n")
    head = "| size | 1 rail |" + "".join(f" {rails} rails {p} | ratio |" for p in policies)
    print(head)
    print("|---:|---:|" + "---:|---:|" * len(policies))
    for size in sizes:
        one = results[("tether", 1, "round_robin", size)]
        row = f"| {human(size)} | {fmt(one)} |"
        for p in policies:
            many = results[("tether", rails, p, size)]
            row += f" {fmt(many)} | {median(many) / median(one):.2f} |"
        print(row)
    lat1, latn = results[("lat", 1)], results[("lat", rails)]
    print(f"\n8 B half round trip: 1 rail {fmt(lat1, 2)} us, {rails} rails {fmt(latn, 2)} us,"
          f" ratio {median(latn) / median(lat1):.2f}")


def loopback(exe, rounds):
    """1 and 2 rails on 127.0.0.1, alternating, launched by tether run."""
    results = {}
    tether = BUILD / "bin" / "tether"
    for _ in range(rounds):
        for rails in (1, 2):
            env = tether_env(TETHER_TRANSPORTS="tcp", TETHER_RAILS=rails)
            args = ["--lat", "8", "--bw", str(16 << 20), "--iters", "20000", "--warmup", "2000"]
            out = subprocess.run([str(tether), "run", "--name", "a", "-n", "1", str(exe), *args, ":",
                                  "--name", "b", "-n", "1", str(exe), *args],
                                 env=env, capture_output=True, text=True, timeout=300, check=True).stdout
            figures = {}
            for line in out.splitlines():
                words = line.split()
                if len(words) == 4 and words[1] in ("latency", "bw"):
                    figures[(words[1], int(words[2]))] = float(words[3])
            results.setdefault(("lat", rails), []).append(figures[("latency", 8)])
            results.setdefault(("bw", rails), []).append(figures[("bw", 16 << 20)])
    print("\n### Loopback (CPU-bound), 1 and 2 rails alternating\n")
    print("| | 1 rail | 2 rails | ratio |")
    print("|---|---:|---:|---:|")
    for what, unit, digits in (("lat", "8 B half round trip (us)", 2), ("bw", "16 MiB bandwidth (MB/s)", 0)):
        one, two = results[(what, 1)], results[(what, 2)]
        print(f"| {unit} | {fmt(one, digits)} | {fmt(two, digits)} | {median(two) / median(one):.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1M,16M,64M,256M")
    ap.add_argument("--beds", default="500,500;500,250;250,250,250,250",
                    help="rail rates in Mbit/s per bed, beds separated by ';'")
    ap.add_argument("--skip-bed", action="store_true")
    ap.add_argument("--skip-loopback", action="store_true")
    args = ap.parse_args()
    exe = build_pingpong()
    sizes = [size_of(s) for s in args.sizes.split(",")]
    policies = ["round_robin", "least_used"]
    load = os.getloadavg()[0]
    print(f"# benches/rails/compare.py: {args.rounds} rounds, load average {load:.2f} at start")
    if not args.skip_bed:
        ok, why = railbed.available()
        if not ok:
            print(f"\n(bed skipped: {why})")
        else:
            for spec in args.beds.split(";"):
                rates = [int(r) for r in spec.split(",")]
                results = {}
                with railbed.RailBed(rates=tuple(rates)) as bed:
                    for _ in range(args.rounds):
                        bed_round(bed, exe, sizes, policies, results)
                bed_report(rates, sizes, policies, results)
    if not args.skip_loopback:
        loopback(exe, args.rounds)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
