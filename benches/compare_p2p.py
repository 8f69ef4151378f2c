#!/usr/bin/env python3
"""Point-to-point comparison: Tether against a raw TCP socket pair and MPICH.

Builds benches/p2p/{tether_pingpong,raw_tcp,mpi_pingpong}.c, runs each
several times on this machine over loopback (interleaved, so that drift in
the machine's load hits all of them alike), and prints markdown tables of
medians (min-max) with the ratios Tether/raw and Tether/MPICH:

  * latency: half round trip of a blocking ping-pong, microseconds;
  * bw: a window of 64 non-blocking sends answered by a small ack (osu_bw),
    MB/s with 1 MB = 1e6 bytes.

Latency and bandwidth are separate runs (as osu_latency and osu_bw).

Usage:
  python3 benches/compare_p2p.py                 # full run, tables on stdout
  python3 benches/compare_p2p.py --quick         # smoke run (seconds), for CI
  python3 benches/compare_p2p.py --write docs/journal/YYYY-MM-DD-p2p-tcp.md
        # full run plus the studies (poll spin, eager limit, MPICH's default
        # channel), written into the file between the generated-section
        # markers (text outside them is kept), or appended to it; past runs
        # are in docs/journal/ (docs/PERFORMANCE.md is make bench's).

Only the Python standard library is needed. MPI is skipped, with a note,
when mpicc or mpiexec is missing; it is never faked.
"""

import argparse
import datetime
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "benches" / "p2p"

LAT_SIZES = [8, 1024, 65536]
BW_SIZES = [1 << 20, 16 << 20]
EAGER_SIZES = [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20]
# The eager study runs with the default poll spin and with one long enough
# that waits practically never sleep (protocol cost without wake-ups).
EAGER_SPINS = [None, "100000"]

# MPICH pinned to loopback TCP. UCX_TLS=tcp keeps UCX off its shared-memory
# transports (which it would otherwise pick between two ranks on one host),
# UCX_NET_DEVICES=lo and `-iface lo` pin it to loopback, MPIR_CVAR_NOLOCAL=1
# keeps a ch4/ch3 build with its own shared-memory module off it too.
MPI_TCP_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo", "MPIR_CVAR_NOLOCAL": "1"}
MPI_LAUNCH = ["-n", "2", "-iface", "lo"]

LINE_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?(latency|bw)\s+(\d+)\s+([0-9.]+)\s*$")
BEGIN = "<!-- compare_p2p.py: generated section begins; edits here are overwritten -->"
END = "<!-- compare_p2p.py: generated section ends -->"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def human(n):
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return f"{n // f} {unit}"
    return f"{n} B"


def sizes_arg(sizes):
    return ",".join(str(s) for s in sizes)


# ---------------------------------------------------------------- building


def locate_tether(args, builddir):
    """Returns (tether launcher, directory holding libtether.so, how)."""
    if args.tether_bin and args.tether_lib:
        return Path(args.tether_bin).resolve(), Path(args.tether_lib).resolve(), "given on the command line"
    made = None
    if (ROOT / "Makefile").exists() and not args.no_make:
        log("building Tether: make -s build")
        r = subprocess.run(["make", "-s", "build"], cwd=ROOT)
        made = r.returncode == 0
        if made:
            launcher = ROOT / "build" / "bin" / "tether"
            libs = sorted((ROOT / "build").glob("**/libtether.so"))
            if launcher.exists() and libs:
                return launcher, libs[0].parent, "make -s build"
            log("make -s build left no build/bin/tether or libtether.so; falling back to cargo")
        else:
            log("make -s build failed; falling back to cargo")
    log("building Tether: cargo build --release -p tether-clib -p tether-cli")
    subprocess.run(
        ["cargo", "build", "--release", "-p", "tether-capi", "-p", "tether-cli"], cwd=ROOT, check=True
    )
    target = ROOT / "target" / "release"
    libdir = builddir / "lib"
    libdir.mkdir(parents=True, exist_ok=True)
    link = libdir / "libtether.so"  # the cdylib's soname is libtether.so
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target / "libtether_clib.so")
    return target / "tether", libdir, "cargo build --release (libtether_clib.so linked as libtether.so)"


def build(args):
    builddir = Path(args.build_dir).resolve()
    builddir.mkdir(parents=True, exist_ok=True)
    launcher, libdir, how = locate_tether(args, builddir)
    cc = os.environ.get("CC", "cc")
    cflags = ["-O2", "-Wall", "-Wextra"]
    progs = {}
    cmd = [cc, *cflags, "-I", str(ROOT / "include"), "-o", str(builddir / "tether_pingpong"),
           str(SRC / "tether_pingpong.c"), "-L", str(libdir), "-ltether", f"-Wl,-rpath,{libdir}"]
    subprocess.run(cmd, check=True)
    progs["tether"] = builddir / "tether_pingpong"
    subprocess.run([cc, *cflags, "-o", str(builddir / "raw_tcp"), str(SRC / "raw_tcp.c")], check=True)
    progs["raw"] = builddir / "raw_tcp"
    notes = [f"Tether built with {how}; launcher {launcher}, library {libdir / 'libtether.so'}."]
    mpicc, mpiexec = shutil.which("mpicc"), shutil.which("mpiexec")
    if args.no_mpi:
        notes.append("MPI skipped (--no-mpi).")
    elif not mpicc or not mpiexec:
        notes.append("MPI skipped: mpicc or mpiexec not found on PATH.")
    else:
        subprocess.run([mpicc, *cflags, "-o", str(builddir / "mpi_pingpong"), str(SRC / "mpi_pingpong.c")],
                       check=True)
        progs["mpi"] = builddir / "mpi_pingpong"
    return launcher, progs, notes


# ----------------------------------------------------------------- running


def clean_env(extra=None):
    """The environment for a run: no inherited TETHER_*/UCX_*/MPIR_CVAR_*
    settings (so defaults are what is measured), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TETHER_", "UCX_", "MPIR_CVAR_", "MPICH_"))}
    env.update(extra or {})
    return env


def parse(out):
    res = {}
    for line in out.splitlines():
        m = LINE_RE.match(line.strip())
        if m:
            res[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return res


def cpu_busy():
    """(busy seconds, total seconds) of all CPUs from /proc/stat; steal counts as busy."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    total = sum(v[:8])  # guest time is already in user
    return (total - idle) / hz, total / hz


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs benchmark commands; with a quiet gate, waits before each run until
    the machine is idle, and repeats a run during which other processes took
    more than `max_foreign` of the machine (a shared, small machine makes
    figures meaningless otherwise)."""

    def __init__(self, launcher, progs, timeout, quiet_gate=True, max_foreign=0.10, retries=3):
        self.launcher = launcher
        self.progs = progs
        self.timeout = timeout
        self.failures = []
        self.quiet_gate = quiet_gate
        self.max_foreign = max_foreign
        self.retries = retries
        self.disturbed = []  # labels of runs kept although disturbed
        self.repeated = 0
        self.ncpu = os.cpu_count() or 1

    def wait_quiet(self, limit_s=300, busy_max=0.10):
        start = time.time()
        while time.time() - start < limit_s:
            a = cpu_busy()
            time.sleep(0.5)
            b = cpu_busy()
            if a is None or b is None:
                return
            if (b[0] - a[0]) / max(b[1] - a[1], 1e-9) < busy_max:
                return
        log(f"machine still busy after {limit_s} s; running anyway")

    def run(self, label, impl, bench_args, env_extra=None, expect=()):
        for attempt in range(self.retries + 1):
            if self.quiet_gate:
                self.wait_quiet()
            b0, c0, t0 = cpu_busy(), children_cpu(), time.time()
            res = self.run_once(label, impl, bench_args, env_extra, expect)
            b1, c1, t1 = cpu_busy(), children_cpu(), time.time()
            if not self.quiet_gate or b0 is None or res is None:
                return res or {}
            foreign = ((b1[0] - b0[0]) - (c1 - c0)) / max((t1 - t0) * self.ncpu, 1e-9)
            log(f"  {label}: {t1 - t0:.1f} s, other processes {max(foreign, 0):.0%} of the CPUs")
            if foreign <= self.max_foreign:
                return res
            if attempt < self.retries:
                self.repeated += 1
                log(f"  {label}: other processes took {foreign:.0%} of the machine during the run; repeating")
            else:
                self.disturbed.append(f"{label} ({foreign:.0%})")
                return res
        return {}

    def command(self, impl, bench_args):
        if impl == "tether":
            p = [str(self.progs["tether"]), *bench_args]
            return [str(self.launcher), "run", "--timeout", str(self.timeout),
                    "--name", "a", "-n", "1", *p, ":", "--name", "b", "-n", "1", *p]
        if impl == "raw":
            return [str(self.progs["raw"]), *bench_args]
        if impl == "raw-poll":
            return [str(self.progs["raw"]), "--bw-poll", *bench_args]
        if impl == "mpi":
            return ["mpiexec", *MPI_LAUNCH, str(self.progs["mpi"]), *bench_args]
        raise ValueError(impl)

    def run_once(self, label, impl, bench_args, env_extra=None, expect=()):
        cmd = self.command(impl, bench_args)
        try:
            r = subprocess.run(cmd, env=clean_env(env_extra), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=self.timeout + 30)
            out, rc = r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
        res = parse(out)
        missing = [k for k in expect if k not in res]
        if rc != 0 or missing:
            msg = f"{label}: {' '.join(shlex.quote(c) for c in cmd)} -> exit {rc}, missing {missing}"
            self.failures.append(msg)
            log("FAILED " + msg + "\n" + out[-2000:])
            return None
        return res


def bench_args(args, lat=None, bw=None):
    a = ["--lat", sizes_arg(lat or []), "--bw", sizes_arg(bw or [])]
    if args.quick:
        a += ["--iters", "200", "--warmup", "20", "--bw-iters", "2", "--bw-warmup", "1"]
    return a


def collect(runner, args, variants, lat_sizes, bw_sizes, reps):
    """variants: list of (name, impl, env[, kinds]). Returns {name: {(kind, size): [values]}}.
    Repetitions are interleaved across variants."""
    data = {v[0]: {} for v in variants}
    for rep in range(reps):
        for v in variants:
            name, impl, env = v[:3]
            kinds = v[3] if len(v) > 3 else ("latency", "bw")
            for kind, sizes in (("latency", lat_sizes), ("bw", bw_sizes)):
                if not sizes or kind not in kinds:
                    continue
                ba = bench_args(args, lat=sizes if kind == "latency" else None,
                                bw=sizes if kind == "bw" else None)
                log(f"[{rep + 1}/{reps}] {name} {kind} {sizes_arg(sizes)}")
                res = runner.run(f"{name} {kind}", impl, ba, env, [(kind, s) for s in sizes])
                for k, v in res.items():
                    data[name].setdefault(k, []).append(v)
    return data


def stats(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


# -------------------------------------------------------------- formatting


def fmt_cell(st, kind):
    if st is None:
        return "n/a"
    med, lo, hi, n = st
    if kind == "latency":
        return f"{med:.2f} ({lo:.2f}-{hi:.2f})"
    return f"{med:.0f} ({lo:.0f}-{hi:.0f})"


def ratio(a, b):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0] / b[0]:.2f}"


def main_tables(data, lat_sizes, bw_sizes, tether="tether", raw="raw", mpi="mpi", mpi_label="MPICH (TCP)"):
    rows = []
    have_mpi = mpi in data and any(data[mpi].values())
    for kind, sizes, unit in (("latency", lat_sizes, "latency, us (half round trip)"),
                              ("bw", bw_sizes, "bandwidth, MB/s (1 MB = 1e6 B)")):
        if not sizes:
            continue
        rows.append(f"| size | Tether {unit} | raw TCP | {mpi_label} | Tether/raw | Tether/MPICH |")
        rows.append("|---:|---:|---:|---:|---:|---:|")
        for s in sizes:
            t = stats(data[tether].get((kind, s)))
            r = stats(data[raw].get((kind, s)))
            m = stats(data[mpi].get((kind, s))) if have_mpi else None
            rows.append(f"| {human(s)} | {fmt_cell(t, kind)} | {fmt_cell(r, kind)} | "
                        f"{fmt_cell(m, kind) if have_mpi else 'skipped'} | {ratio(t, r)} | {ratio(t, m)} |")
        rows.append("")
    return "\n".join(rows)


def targets(data, have_mpi):
    """The issue's targets, judged on medians."""
    out = []
    med = lambda name, k: (stats(data.get(name, {}).get(k)) or (None,))[0]
    t8, r8, m8 = med("tether", ("latency", 8)), med("raw", ("latency", 8)), med("mpi", ("latency", 8))
    if t8 and r8:
        q = t8 / r8
        out.append(f"| 8 B latency <= 1.25 x raw busy-polling TCP | {t8:.2f} us vs {r8:.2f} us = {q:.2f}x | "
                   f"{'met' if q <= 1.25 else 'MISSED'} |")
    if have_mpi and t8 and m8:
        q = t8 / m8
        out.append(f"| 8 B latency <= MPICH over TCP | {t8:.2f} us vs {m8:.2f} us = {q:.2f}x | "
                   f"{'met' if q <= 1.0 else 'MISSED'} |")
    for s in BW_SIZES:
        t, r, m = med("tether", ("bw", s)), med("raw", ("bw", s)), med("mpi", ("bw", s))
        if not t or not r:
            continue
        best, who = (m, "MPICH") if have_mpi and m and m > r else (r, "raw TCP")
        q = t / best
        out.append(f"| {human(s)} bandwidth >= 0.95 x best of raw TCP and MPICH | {t:.0f} vs {best:.0f} MB/s "
                   f"({who}) = {q:.2f}x | {'met' if q >= 0.95 else 'MISSED'} |")
    if not out:
        return ""
    return "\n".join(["| target | measured (medians) | verdict |", "|---|---|---|", *out, ""])


def spin_table(data, lat_sizes, bw_sizes):
    rows = ["| size | TETHER_POLL_SPIN_US=50 (default) | =1000 | =100000 | raw TCP (blocking stream) "
            "| raw TCP (busy-polling stream) | MPICH (TCP) |",
            "|---:|---:|---:|---:|---:|---:|---:|"]
    get = lambda name, k: stats(data.get(name, {}).get(k))
    for kind, sizes in (("latency", lat_sizes), ("bw", bw_sizes)):
        for s in sizes:
            k = (kind, s)
            unit = "us" if kind == "latency" else "MB/s"
            rp = fmt_cell(get("raw-poll", k), kind) if kind == "bw" else "(same as left)"
            rows.append(f"| {kind} {human(s)} ({unit}) | {fmt_cell(get('tether', k), kind)} | "
                        f"{fmt_cell(get('tether-spin1000', k), kind)} | {fmt_cell(get('tether-spin100000', k), kind)} | "
                        f"{fmt_cell(get('raw', k), kind)} | {rp} | {fmt_cell(get('mpi', k), kind)} |")
    return "\n".join(rows) + "\n"


def mpi_default_table(data, lat_sizes, bw_sizes):
    rows = ["| size | MPICH default channel | MPICH over TCP | Tether (TCP) |", "|---:|---:|---:|---:|"]
    for kind, sizes in (("latency", lat_sizes), ("bw", bw_sizes)):
        for s in sizes:
            unit = "us" if kind == "latency" else "MB/s"
            rows.append(f"| {kind} {human(s)} ({unit}) | {fmt_cell(stats(data['mpi-default'].get((kind, s))), kind)} | "
                        f"{fmt_cell(stats(data['mpi'].get((kind, s))), kind)} | "
                        f"{fmt_cell(stats(data['tether'].get((kind, s))), kind)} |")
    return "\n".join(rows) + "\n"


def eager_table(data, sizes, spin):
    tag = spin or "default"
    rows = ["| size | latency (us), eager | rendezvous | rndv/eager | unexpected latency (us), eager | "
            "rendezvous | rndv/eager | bw (MB/s), eager | rendezvous | rndv/eager |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        e, r = data.get(f"eager-{s}-{tag}", {}), data.get(f"rndv-{s}-{tag}", {})
        cells = []
        for kind in ("latency", "probe", "bw"):
            a, b = stats(e.get((kind, s))), stats(r.get((kind, s)))
            f = "bw" if kind == "bw" else "latency"
            cells += [fmt_cell(a, f), fmt_cell(b, f), ratio(b, a)]
        rows.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------- machine facts


def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine():
    facts = {}
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts["CPU"] = cpu or platform.processor() or "unknown"
    facts["logical CPUs"] = str(os.cpu_count())
    facts["kernel"] = f"{platform.system()} {platform.release()}"
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                facts["OS"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    ccv = sh([os.environ.get("CC", "cc"), "--version"]).splitlines()
    facts["C compiler"] = ccv[0] if ccv else ""
    facts["rustc"] = sh(["rustc", "--version"])
    mv = sh(["mpichversion"]) if shutil.which("mpichversion") else ""
    ver = re.search(r"MPICH Version:\s*(\S+)", mv)
    dev = re.search(r"MPICH Device:\s*(\S+)", mv)
    if ver:
        facts["MPICH"] = f"{ver.group(1)}, device {dev.group(1) if dev else '?'}"
    ucx = sh(["ucx_info", "-v"]) if shutil.which("ucx_info") else ""
    m = re.search(r"Library version:\s*(\S+)", ucx)
    if m:
        facts["UCX"] = m.group(1)
    elif shutil.which("dpkg-query"):
        v = sh(["dpkg-query", "-W", "-f", "${Version}", "libucx0"])
        if v and "no packages" not in v.lower():
            facts["UCX"] = f"{v} (Debian libucx0)"
    facts["git"] = (sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]) +
                    (" (uncommitted changes)" if sh(["git", "-C", str(ROOT), "status", "--porcelain"]) else ""))
    return facts


def mpi_channel(runner, env_extra):
    """Which UCX transport MPICH picked between the two ranks (from UCX's own log)."""
    if "mpi" not in runner.progs:
        return None
    env = dict(env_extra)
    env["UCX_LOG_LEVEL"] = "info"
    cmd = runner.command("mpi", ["--lat", "8", "--bw", "", "--iters", "10", "--warmup", "1"])
    try:
        out = subprocess.run(cmd, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:
        return "unknown (probe timed out)"
    # ep_cfg lines of the endpoint to the other rank (not to self)
    cfgs = sorted({m.group(1) for m in re.finditer(r"ep_cfg\[\d+\]: (tag\([^)]*\))", out) if "self/" not in m.group(1)})
    return ", ".join(cfgs) if cfgs else "unknown (UCX printed no ep_cfg line)"


# ------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny iteration counts, 1 repetition")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per measurement (default 5; quick 1)")
    ap.add_argument("--studies", action="store_true",
                    help="also run the poll-spin, eager-limit and MPICH-default-channel studies (implied by --write)")
    ap.add_argument("--eager-reps", type=int, default=None, help="repetitions in the eager-limit study (default 3)")
    ap.add_argument("--write", metavar="PATH", help="write the report (e.g. a new docs/journal/ entry)")
    ap.add_argument("--no-mpi", action="store_true", help="leave MPI out")
    ap.add_argument("--no-make", action="store_true", help="build Tether with cargo even if a Makefile exists")
    ap.add_argument("--tether-bin", help="the tether launcher to use (with --tether-lib: skip building Tether)")
    ap.add_argument("--tether-lib", help="directory holding libtether.so")
    ap.add_argument("--build-dir", default=str(ROOT / "build" / "bench"), help="where the programs are built")
    ap.add_argument("--timeout", type=int, default=300, help="seconds one run may take")
    ap.add_argument("--no-quiet-gate", action="store_true",
                    help="do not wait for an idle machine nor repeat runs disturbed by other processes "
                         "(default for --quick)")
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    eager_reps = args.eager_reps or (1 if args.quick else 3)
    studies = args.studies or bool(args.write)

    launcher, progs, notes = build(args)
    runner = Runner(launcher, progs, args.timeout, quiet_gate=not (args.quick or args.no_quiet_gate))
    have_mpi = "mpi" in progs
    facts = machine()
    load_before = os.getloadavg()
    started = time.time()

    variants = [("tether", "tether", {}), ("raw", "raw", {})]
    if have_mpi:
        variants.append(("mpi", "mpi", MPI_TCP_ENV))
    if studies:
        variants.append(("tether-spin1000", "tether", {"TETHER_POLL_SPIN_US": "1000"}))
        variants.append(("tether-spin100000", "tether", {"TETHER_POLL_SPIN_US": "100000"}))
        variants.append(("raw-poll", "raw-poll", {}, ("bw",)))
        if have_mpi:
            variants.append(("mpi-default", "mpi", {}))
    data = collect(runner, args, variants, LAT_SIZES, BW_SIZES, reps)

    channel_tcp = mpi_channel(runner, MPI_TCP_ENV) if have_mpi else None
    channel_default = mpi_channel(runner, {}) if have_mpi and studies else None

    eager = {}
    if studies:
        ev = []
        for spin in EAGER_SPINS:
            for sz in EAGER_SIZES:
                env = {"TETHER_POLL_SPIN_US": spin} if spin else {}
                ev.append((f"eager-{sz}-{spin or 'default'}", sz, {**env, "TETHER_EAGER_LIMIT": str(sz)}))
                ev.append((f"rndv-{sz}-{spin or 'default'}", sz, {**env, "TETHER_EAGER_LIMIT": str(sz - 1)}))
        for rep in range(eager_reps):
            for name, sz, env in ev:
                # "probe": the ping-pong with the receive posted only after a
                # probe saw the message (it arrives unexpected)
                for kind in ("latency", "probe", "bw"):
                    ba = bench_args(args, lat=[sz] if kind != "bw" else None, bw=[sz] if kind == "bw" else None)
                    if kind == "probe":
                        ba += ["--probe", "1"]
                    want = "bw" if kind == "bw" else "latency"
                    log(f"[{rep + 1}/{eager_reps}] {name} {kind}")
                    res = runner.run(f"{name} {kind}", "tether", ba, env, [(want, sz)])
                    for (k, size), v in res.items():
                        eager.setdefault(name, {}).setdefault((kind, size), []).append(v)

    elapsed = time.time() - started
    load_after = os.getloadavg()

    cmdline = "python3 benches/compare_p2p.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    out = []
    out.append(f"Generated {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} by `{cmdline.strip()}`"
               f" in {elapsed / 60:.1f} min{' (QUICK smoke run: figures are not meaningful)' if args.quick else ''}.")
    out.append("")
    out.append("Machine:")
    out.append("")
    for k, v in facts.items():
        if v:
            out.append(f"- {k}: {v}")
    out.append(f"- load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    out.append("")
    for n in notes:
        out.append(f"- {n}")
    if have_mpi:
        out.append(f"- MPICH over TCP: `{' '.join(f'{k}={v}' for k, v in MPI_TCP_ENV.items())} "
                   f"mpiexec {' '.join(MPI_LAUNCH)} mpi_pingpong`; transport UCX chose: `{channel_tcp}`.")
    out.append(f"- Each figure: median (min-max) of {reps} runs; runs of the implementations interleaved. "
               f"Latency and bandwidth are separate runs.")
    if runner.quiet_gate:
        out.append(f"- Quiet gate: each run started on an idle machine (< 10% CPU busy over 0.5 s); "
                   f"{runner.repeated} run(s) repeated because other processes took > 10% of the CPUs during them"
                   + (f"; kept although disturbed: {', '.join(runner.disturbed)}" if runner.disturbed else "") + ".")
    else:
        out.append("- No quiet gate: figures may include interference from other processes.")
    out.append("")
    out.append("### Tether against raw TCP and MPICH (all over 127.0.0.1)")
    out.append("")
    out.append(main_tables(data, LAT_SIZES, BW_SIZES))
    tg = targets(data, have_mpi)
    if tg:
        out.append("### Targets (issue 2)")
        out.append("")
        out.append(tg)
    if studies:
        out.append("### Poll spin: default against longer TETHER_POLL_SPIN_US, and the bandwidth references")
        out.append("")
        out.append(spin_table(data, LAT_SIZES, BW_SIZES))
        if have_mpi:
            out.append(f"### MPICH's default channel (for information; transport UCX chose: `{channel_default}`)")
            out.append("")
            out.append(mpi_default_table(data, LAT_SIZES, BW_SIZES))
        out.append("### Eager limit: each size sent eagerly (TETHER_EAGER_LIMIT=size) and by rendezvous "
                   "(TETHER_EAGER_LIMIT=size-1)")
        out.append("")
        out.append(f"Median (min-max) of {eager_reps} runs each. Latency: the ping-pong half round trip with "
                   "the receive posted before the message comes; unexpected latency: the same ping-pong where "
                   "each side first waits in `tether_probe` until the message is there and only then receives "
                   "it (`tether_pingpong --probe 1`); bw: the 64-message window. For latency a ratio "
                   "rndv/eager above 1 favours eager; for bw, below 1.")
        out.append("")
        for spin in EAGER_SPINS:
            out.append(f"With TETHER_POLL_SPIN_US={spin or 'default (50)'}:")
            out.append("")
            out.append(eager_table(eager, EAGER_SIZES, spin))
    out.append("<details><summary>Every run (in order)</summary>")
    out.append("")
    for name, d in list(data.items()) + list(eager.items()):
        for (kind, size), vals in sorted(d.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            out.append(f"- {name} {kind} {human(size)}: {' '.join(f'{v:g}' for v in vals)}")
    out.append("")
    out.append("</details>")
    out.append("")
    if runner.failures:
        out.append("### Failed runs")
        out.append("")
        for f in runner.failures:
            out.append(f"- `{f}`")
        out.append("")
    text = "\n".join(out).rstrip() + "\n"
    print(text)

    if args.write:
        path = Path(args.write)
        if not path.is_absolute():
            path = ROOT / path
        block = f"{BEGIN}\n\n{text}\n{END}\n"
        if path.exists():
            old = path.read_text()
            if BEGIN in old and END in old:
                new = old[: old.index(BEGIN)] + block + old[old.index(END) + len(END):].lstrip("\n")
            else:
                new = old.rstrip() + "\n\n## Measurements\n\n" + block
        else:
            new = ("# Performance\n\n"
                   "Point-to-point figures measured by `benches/compare_p2p.py`.\n\n"
                   "## Measurements\n\n" + block)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new)
        log(f"wrote {path}")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
