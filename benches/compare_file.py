#!/usr/bin/env python3
"""File and hybrid transports against TCP and the raw file system, all in
one run on this host, the two processes acting as two hosts that share a
directory: streaming bandwidth (osu_bw style: a window of
non-blocking sends answered by one ack, benches/p2p/tether_pingpong.c)
from 8 B to 256 MiB between two processes with TETHER_TRANSPORTS=tcp,
file and hybrid, next to benches/file/raw_file.c (the same bytes written
to a file and read back through the same directory, one process).

Prints a markdown table of medians (min-max) over --reps interleaved
repetitions, with each transport's ratio to the raw file baseline, and
writes the plot docs/perf_file_bandwidth.png (bandwidth against size, one
line per transport and the baseline). --thresholds also runs hybrid at
several TETHER_HYBRID_THRESHOLD values (how the default was chosen).

--sizes and --setups run a subset (each size keeps its group's window),
to iterate quickly; the raw baseline always runs.

Usage: python3 benches/compare_file.py [--reps 3] [--quick] [--thresholds]
           [--sizes 16M,64M] [--setups file,tcp] [--dir DIR] [--plot PATH]
Needs `make build` first, and matplotlib for the plot (skipped with a note
when missing).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_p2p import clean_env, parse  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench"
TETHER = ROOT / "build" / "bin" / "tether"
KIB, MIB = 1 << 10, 1 << 20
# (sizes, window, timed windows, warm-up windows): large sizes stream fewer
# messages at once so that the files in flight stay within memory and disk.
GROUPS = [
    ([8, 64, 512, 4 * KIB, 32 * KIB, 256 * KIB, MIB], 64, None, None),
    ([4 * MIB, 16 * MIB], 4, 5, 1),
    ([64 * MIB, 256 * MIB], 2, 3, 1),
]
QUICK_GROUPS = [([8, 4 * KIB, 256 * KIB], 16, 5, 1), ([16 * MIB], 2, 2, 1)]
TRANSPORTS = ["tcp", "file", "hybrid"]


def size_arg(text):
    """`16M`, `4K` or a number of bytes."""
    scale = {"K": KIB, "M": MIB}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def log(text):
    print(text, file=sys.stderr, flush=True)


def build():
    OUT.mkdir(parents=True, exist_ok=True)
    lib = ROOT / "build" / "lib"
    cc = ["cc", "-O2", "-Wall", "-Wextra"]
    subprocess.run([*cc, "-I", str(ROOT / "include"), "-o", str(OUT / "tether_pingpong"),
                    str(ROOT / "benches/p2p/tether_pingpong.c"), "-L", str(lib), "-ltether",
                    f"-Wl,-rpath,{lib}"], check=True)
    subprocess.run([*cc, "-Wno-unused-function", "-o", str(OUT / "raw_file"), str(ROOT / "benches/file/raw_file.c")],
                   check=True)


def group_args(sizes, window, iters, warmup):
    args = ["--lat", "", "--bw", ",".join(map(str, sizes)), "--window", str(window)]
    if iters:
        args += ["--bw-iters", str(iters), "--bw-warmup", str(warmup)]
    return args


def run(cmd, env=None, timeout=600):
    r = subprocess.run(cmd, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        log(f"  failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout[-2000:]}")
        return {}
    return {size: mbps for (kind, size), mbps in parse(r.stdout).items() if kind == "bw"}


def tether(args, transports, directory, extra=None):
    """The two processes act as on two hosts (TETHER_HOST_ID) that share
    the directory, so that hybrid pairs tcp with files, as between two
    machines, rather than shared memory with files."""
    prog = [str(OUT / "tether_pingpong"), *args]
    env = {"TETHER_TRANSPORTS": transports, "TETHER_FILE_DIR": str(directory), **(extra or {})}
    return run([str(TETHER), "run", "--timeout", "580",
                "--name", "a", "-n", "1", "env", "TETHER_HOST_ID=host-a", *prog, ":",
                "--name", "b", "-n", "1", "env", "TETHER_HOST_ID=host-b", *prog], env)


def raw(args, directory):
    return run([str(OUT / "raw_file"), "--dir", str(directory), *args])


def human(size):
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def summary(values):
    if not values:
        return "n/a"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="few sizes, few iterations (a smoke run)")
    ap.add_argument("--thresholds", action="store_true", help="also hybrid at several thresholds")
    ap.add_argument("--sizes", help="only these sizes, comma-separated (e.g. 16M,64M,256M)")
    ap.add_argument("--setups", help="only these transports or settings, comma-separated (e.g. file,tcp)")
    ap.add_argument("--dir", help="directory the files go through (default: a temporary one)")
    ap.add_argument("--plot", default=str(ROOT / "docs" / "perf_file_bandwidth.png"))
    opts = ap.parse_args()
    build()
    groups = QUICK_GROUPS if opts.quick else GROUPS
    if opts.sizes:
        wanted = {size_arg(s) for s in opts.sizes.split(",")}
        groups = [(sorted(wanted & set(g[0])), *g[1:]) for g in groups if wanted & set(g[0])]
        if not groups:
            ap.error(f"no size of {opts.sizes} is measured (see GROUPS)")
    directory = Path(opts.dir or tempfile.mkdtemp(prefix="tether-bench-files-"))
    directory.mkdir(parents=True, exist_ok=True)
    setups = {t: (t, {}) for t in TRANSPORTS}
    if opts.thresholds:
        for limit in (MIB, 16 * MIB, 64 * MIB):
            setups[f"hybrid@{human(limit)}"] = ("hybrid", {"TETHER_HYBRID_THRESHOLD": str(limit)})
    if opts.setups:
        unknown = set(opts.setups.split(",")) - set(setups)
        if unknown:
            ap.error(f"unknown setups {', '.join(sorted(unknown))} (known: {', '.join(setups)})")
        setups = {n: v for n, v in setups.items() if n in opts.setups.split(",")}
    results = {name: {} for name in ["raw file", *setups]}
    for rep in range(opts.reps):
        for sizes, window, iters, warmup in groups:
            args = group_args(sizes, window, iters, warmup)
            log(f"rep {rep + 1}/{opts.reps}: {human(sizes[0])}..{human(sizes[-1])}, window {window}")
            # The file system's writeback of one run (journal commits of
            # thousands of created and removed files) must not run into
            # the next: every measurement starts after a sync.
            os.sync()
            measured = {"raw file": raw(args, directory)}
            for name, (transports, extra) in setups.items():
                os.sync()
                measured[name] = tether(args, transports, directory, extra)
            for name, by_size in measured.items():
                for size, mbps in by_size.items():
                    results[name].setdefault(size, []).append(mbps)
    sizes = sorted({s for g in groups for s in g[0]})
    names = list(results)
    print("| size | " + " | ".join(names) + " | " + " | ".join(f"{n} / raw" for n in setups) + " |")
    print("|" + "---|" * (1 + len(names) + len(setups)))
    for size in sizes:
        base = results["raw file"].get(size)
        cells = [summary(results[n].get(size, [])) for n in names]
        ratios = []
        for n in setups:
            got = results[n].get(size)
            ratios.append(f"{statistics.median(got) / statistics.median(base):.2f}" if got and base else "n/a")
        print(f"| {human(size)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print(f"\nMB/s (1 MB = 1e6 B), median (min-max) of {opts.reps} repetitions; files in {directory}.")
    print_targets(results, sizes, [n for n in setups if n.startswith("hybrid")])
    if opts.sizes or opts.setups:
        log("a subset was measured: no plot")
    else:
        plot(results, sizes, Path(opts.plot))


def print_targets(results, sizes, hybrids):
    """The issue's targets: file against the raw baseline from 16 MiB up,
    and each hybrid setting against the faster of its two parts."""
    med = {n: {s: statistics.median(v) for s, v in by.items() if v} for n, by in results.items()}
    med.setdefault("tcp", {})
    med.setdefault("file", {})
    if hybrids:
        print("\n| size | faster part | " + " | ".join(f"{h} / faster" for h in hybrids) + " |")
        print("|" + "---|" * (2 + len(hybrids)))
    for size in sizes if hybrids else []:
        parts = {p: med[p].get(size) for p in ("tcp", "file") if med[p].get(size)}
        if not parts:
            continue
        best = max(parts, key=parts.get)
        cells = [f"{med[h][size] / parts[best]:.2f}" if med[h].get(size) else "n/a" for h in hybrids]
        print(f"| {human(size)} | {best} | " + " | ".join(cells) + " |")
    big = [s for s in sizes if s >= 16 * MIB and med["file"].get(s) and med["raw file"].get(s)]
    if big:
        worst = min(med["file"][s] / med["raw file"][s] for s in big)
        print(f"\nfile / raw file from 16 MiB up: worst {worst:.2f} (target 0.8)")


def plot(results, sizes, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, by_size in results.items():
        xs = [s for s in sizes if by_size.get(s)]
        if xs:
            style = "k--" if name == "raw file" else "-"
            ax.plot(xs, [statistics.median(by_size[s]) for s in xs], style, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (MB/s)")
    ax.set_title("Tether file, hybrid and tcp transports against the raw file system")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    log(f"plot written to {path}")


if __name__ == "__main__":
    main()
