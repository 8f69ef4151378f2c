"""Two builds of Tether against each other on this machine: runs `tether
bench` of each in turn, the order swapped every round, and prints the
median of the round medians (each round's medians in brackets) with the
ratio new/old, as a markdown table (docs/journal/).

    python3 benches/compare_builds.py OLD/bin/tether NEW/bin/tether [--rounds 3]

Cases: 8 B latency over shm and tcp, 1 MiB and 16 MiB bandwidth over shm
and tcp, `--reps 3` each. Measure on a quiet machine: on 2 CPUs any other
work shows up as factors, not percents."""

import argparse
import json
import statistics
import subprocess

CASES = [("latency", "shm", "8"), ("latency", "tcp", "8"), ("bw", "shm", "1M,16M"), ("bw", "tcp", "1M,16M")]


def medians(binary, mode, transport, sizes):
    out = subprocess.run([binary, "bench", mode, "--transport", transport, "--sizes", sizes, "--baselines", "none",
                          "--reps", "3", "--json"], capture_output=True, text=True, timeout=600, check=True).stdout
    return {p["size"]: p["median"] for p in json.loads(out)["series"][0]["points"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {}
    for r in range(args.rounds):
        order = [("old", args.old), ("new", args.new)]
        for mode, transport, sizes in CASES:
            for name, binary in order if r % 2 == 0 else order[::-1]:
                for size, median in medians(binary, mode, transport, sizes).items():
                    results.setdefault((mode, transport, size, name), []).append(median)
    print("| mode | transport | size | old | new | new/old |\n|---|---|---:|---:|---:|---:|")
    for mode, transport, size, _ in sorted(k for k in results if k[3] == "old"):
        old, new = results[(mode, transport, size, "old")], results[(mode, transport, size, "new")]
        unit = " us" if mode == "latency" else " MB/s"
        show = (lambda v: f"{v:.3f}") if mode == "latency" else (lambda v: f"{v:,.0f}")
        rounds = lambda v: ", ".join(show(x) for x in v)
        mo, mn = statistics.median(old), statistics.median(new)
        print(f"| {mode} | {transport} | {size} | {show(mo)}{unit} [{rounds(old)}] | "
              f"{show(mn)}{unit} [{rounds(new)}] | {mn / mo:.2f} |")


if __name__ == "__main__":
    main()
