#!/usr/bin/env python3
"""The rail test bed: two network namespaces joined by rate-limited veth rails.

What rails are for (several connections per peer, one per NIC) cannot be
seen on loopback, where one connection is CPU-bound and a second only adds
work. This bed gives a single machine N slow links instead: namespaces
side "a" and side "b", joined by N veth pairs (rails 1..N, N <= 4), each
rail limited by a tbf qdisc on both ends (so in both directions) to its
own rate. One TCP stream then gets about one rail's rate, and a striped
transfer over N rails about N times that, as long as the machine is not
CPU-bound (keep rates at a few hundred Mbit/s on 2 cores).

Rail R (1-based) is interface `railR` in both namespaces, with address
10.R.0.1/24 on side a and 10.R.0.2/24 on side b; lo is up on both sides.
There is no route between rails, so a connection to 10.R.0.2 uses rail R.

From Python (pytest or a benchmark):

    import railbed
    ok, why = railbed.available()          # (False, reason) -> pytest.skip(why)
    with railbed.RailBed([200, 200]) as bed:
        rx = bed.popen("b", ["prog", "serve"])             # inside side b
        bed.run("a", ["prog", "client", bed.addr("b", 1)], timeout=10)
        bed.env()   # RAILBED_A, RAILBED_B, RAILBED_A_ADDRS=10.1.0.1,10.2.0.1, ...
        bed.set_rate(2, 100)                 # change a rail's rate, both ways
        bed.set_link(2, up=False)            # take a rail down (a lost NIC)
        bed.counters()                       # bytes each rail carried, per side
    r = railbed.raw_stream(bed, 32 << 20)    # the raw striping baseline

From a shell:

    python3 tests/railbed.py up --rates 200,200   # prints RAILBED_* lines
    python3 tests/railbed.py down                 # removes what up left
    python3 tests/railbed.py run --rates 200,200 -- CMD ...   # bed for CMD
    python3 tests/railbed.py run --side b -- CMD ...          # CMD in side b
    python3 tests/railbed.py measure --rates 200,200          # raw figures

Names: every bed's namespaces are "railbed-<id>-a" and "railbed-<id>-b".
A bed made by a program has id "<pid>.<n>" and is removed when the program
leaves (context manager, atexit, SIGTERM/SIGHUP/SIGINT); a program killed
with SIGKILL leaves its bed behind, and the next bed made anywhere removes
beds whose pid is no longer alive (never those of live programs, so two
engineers' runs do not tear each other's beds down). `up` makes a kept bed
(id "up<pid>" or --name), which only `down` removes.

Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN), `ip` and `tc` (Debian:
iproute2) and the kernel's veth and sch_tbf; `available()` says which is
missing. Every subprocess runs with a timeout.
"""

import argparse
import atexit
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAW_STREAM_SOURCE = ROOT / "benches" / "rails" / "raw_stream.c"
PREFIX = "railbed-"
MAX_RAILS = 4
# Administrative commands (ip, tc) take milliseconds; this bounds a hung one.
ADMIN_TIMEOUT = 10.0
# tbf's queue: packets wait at most this long before they are dropped. 20 ms
# keeps a full queue short (a ping behind a bulk stream waits <= 20 ms) and
# was enough for one TCP stream to reach 95.5% of the rate at 200 and 500
# Mbit/s, which is the goodput after TCP/IP/Ethernet headers (1448 of 1514
# bytes); 50 ms gave the same.
DEFAULT_LATENCY_MS = 20
# sbin is not on a normal user's PATH on Debian, where ip and tc live.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])

_counter = itertools.count(1)
_live = set()  # beds up in this process, taken down at exit or on a signal
_live_lock = threading.Lock()
_handlers_installed = False


class RailBedError(RuntimeError):
    """A bed could not be set up or a command in it failed."""


def _tool(name):
    return shutil.which(name, path=_SEARCH_PATH)


def _admin(argv, check=True, timeout=ADMIN_TIMEOUT):
    """Runs one ip/tc command (argv[0] resolved on the sbin-extended PATH)."""
    exe = _tool(argv[0]) or argv[0]
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RailBedError(f"{' '.join(argv)}: no answer in {timeout} s")
    if check and p.returncode != 0:
        raise RailBedError(f"{' '.join(argv)}: {p.stderr.strip() or f'exit {p.returncode}'}")
    return p


def burst_for(mbit):
    """tbf bucket size for a rate: 1 ms worth of bytes, at least 32 KiB.

    The bucket must hold more than one packet (veth hands tbf GSO packets of
    up to 64 KiB, which tbf segments when they exceed it) and little enough
    that the rate holds over short intervals. 16 KiB to 128 KiB all gave
    the same single-stream rate at 200 and 500 Mbit/s.
    """
    return max(32 * 1024, int(mbit * 1e6 / 8 / 1000))


# --------------------------------------------------------------- availability


_available = None


def available():
    """(True, "") where a bed can be made here, else (False, why).

    Checks the platform, `ip` and `tc`, then makes and removes a one-rail
    probe bed (namespaces, veth, tbf), so a missing privilege or kernel
    module shows up here as a reason rather than in the middle of a test.
    The answer is cached for the process.
    """
    global _available
    if _available is None:
        _available = _probe()
    return _available


def _probe():
    if not sys.platform.startswith("linux"):
        return False, "rail test bed: needs Linux network namespaces"
    missing = [t for t in ("ip", "tc") if _tool(t) is None]
    if missing:
        return False, (f"rail test bed: {' and '.join(missing)} not found "
                       "(Debian: apt-get install iproute2; `make deps` installs it)")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return False, "rail test bed: needs root (network namespaces, veth and tc)"
    bed = RailBed([100], _probe=True)
    try:
        bed.up()
    except RailBedError as e:
        return False, f"rail test bed: not permitted or not supported here: {e}"
    finally:
        bed.down()
    return True, ""


# ----------------------------------------------------------------- cleanup


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_beds():
    """Bed ids with namespaces on this machine: {id: [namespace, ...]}."""
    p = _admin(["ip", "netns", "list"], check=False)
    beds = {}
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(re.escape(PREFIX) + r"(.+)-[ab]", name)
        if m:
            beds.setdefault(m.group(1), []).append(name)
    return beds


def _remove_namespace(ns):
    # Processes still inside would keep the namespace (and its veths) alive
    # after `ip netns del`: end them first.
    p = _admin(["ip", "netns", "pids", ns], check=False)
    for tok in p.stdout.split():
        try:
            os.kill(int(tok), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    _admin(["ip", "netns", "del", ns], check=False)


def cleanup_leftovers(everything=False, kept=False):
    """Removes beds left behind; returns the ids removed.

    By default only beds of programs that are no longer alive (a run killed
    with SIGKILL); kept=True also beds made by `up`; everything=True all
    beds with the prefix, including those of live programs.
    """
    removed = []
    for bed_id, namespaces in sorted(list_beds().items()):
        m = re.fullmatch(r"(\d+)\.\d+p?", bed_id)
        if everything:
            pass
        elif m:
            if _pid_alive(int(m.group(1))):
                continue
        elif not kept:
            continue
        for ns in namespaces:
            _remove_namespace(ns)
        removed.append(bed_id)
    return removed


def _down_all():
    with _live_lock:
        beds = list(_live)
    for bed in beds:
        try:
            bed.down()
        except Exception:  # at exit, keep going: the other beds still go down
            pass


def _on_signal(signum, frame):
    _down_all()
    previous = _previous_handlers.get(signum)
    if callable(previous):
        previous(signum, frame)
    else:
        # Default action: die of the same signal, as if we had not caught it.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_previous_handlers = {}


def _install_handlers():
    """atexit, and SIGTERM/SIGHUP chained to whatever handler was there.

    SIGINT is left to Python (KeyboardInterrupt unwinds through the context
    manager and atexit). Signal handlers can only be set from the main
    thread; elsewhere atexit and the context manager still apply.
    """
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_down_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            _previous_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):
            pass


# --------------------------------------------------------------------- bed


class RailBed:
    """Two namespaces, side "a" and side "b", joined by len(rates) rails.

    rates: Mbit/s per rail, e.g. [200] or [500, 250]; None for a rail
    without a limit. burst (bytes) and latency_ms tune tbf (defaults:
    burst_for(rate), DEFAULT_LATENCY_MS). name: the bed's id (default
    "<pid>.<n>"); keep=True leaves the bed up when the program ends (what
    `railbed.py up` does).
    """

    def __init__(self, rates=(200,), *, name=None, burst=None,
                 latency_ms=DEFAULT_LATENCY_MS, keep=False, _probe=False):
        rates = list(rates)
        if not 1 <= len(rates) <= MAX_RAILS:
            raise ValueError(f"1 to {MAX_RAILS} rails, not {len(rates)}")
        self.rates = rates
        self.burst = burst
        self.latency_ms = latency_ms
        self.keep = keep
        if name is None:
            name = f"{os.getpid()}.{next(_counter)}"
            if _probe:
                name += "p"  # still "<pid>.<n>...": a dead prober's is a leftover
        elif re.match(r"\d", name) or not re.fullmatch(r"[A-Za-z0-9_.]+", name):
            raise ValueError("a bed name is letters, digits, '_' or '.', not starting with a digit")
        self.id = name
        self.ns = {"a": f"{PREFIX}{name}-a", "b": f"{PREFIX}{name}-b"}
        self._procs = []
        self._up = False
        self._probe = _probe

    # -- addresses --------------------------------------------------------

    @property
    def rails(self):
        return len(self.rates)

    def addr(self, side, rail):
        """Address of `side` ("a" or "b") on rail `rail` (1-based)."""
        self._check_rail(rail)
        return f"10.{rail}.0.{1 if self._side(side) == 'a' else 2}"

    def addrs(self, side, rails=None):
        """Addresses of `side` on the given rails (default all), in order."""
        return [self.addr(side, r) for r in (rails or range(1, self.rails + 1))]

    @staticmethod
    def interface(rail):
        """The rail's interface name, the same on both sides."""
        return f"rail{rail}"

    def env(self):
        """RAILBED_* variables that describe the bed, for child programs."""
        return {
            "RAILBED_A": self.ns["a"],
            "RAILBED_B": self.ns["b"],
            "RAILBED_RAILS": str(self.rails),
            "RAILBED_RATES": ",".join(str(r or 0) for r in self.rates),
            "RAILBED_A_ADDRS": ",".join(self.addrs("a")),
            "RAILBED_B_ADDRS": ",".join(self.addrs("b")),
        }

    # -- life -------------------------------------------------------------

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False

    def up(self):
        """Creates the namespaces, rails, addresses and rate limits."""
        if self._up:
            return self
        if not self._probe:
            ok, why = available()
            if not ok:
                raise RailBedError(why)
            cleanup_leftovers()
        if not self.keep:
            _install_handlers()
            with _live_lock:
                _live.add(self)
        self._up = True  # from here on, down() removes whatever was made
        a, b = self.ns["a"], self.ns["b"]
        _admin(["ip", "netns", "add", a])
        _admin(["ip", "netns", "add", b])
        for ns in (a, b):
            _admin(["ip", "-n", ns, "link", "set", "lo", "up"])
        for rail in range(1, self.rails + 1):
            dev = self.interface(rail)
            # Both ends are created inside their namespaces: no name in the
            # root namespace, so concurrent beds cannot collide.
            _admin(["ip", "link", "add", dev, "netns", a, "type", "veth",
                    "peer", "name", dev, "netns", b])
            for side in ("a", "b"):
                ns = self.ns[side]
                _admin(["ip", "-n", ns, "addr", "add", f"{self.addr(side, rail)}/24", "dev", dev])
                _admin(["ip", "-n", ns, "link", "set", dev, "up"])
            self.set_rate(rail, self.rates[rail - 1])
        self._wait_operational()
        return self

    def _wait_operational(self, timeout=5.0):
        # The kernel turns a veth's carrier on, and attaches its qdisc,
        # asynchronously (linkwatch, up to about a second later); until
        # then packets are dropped and a first connect() waits for TCP's
        # 1 s SYN retransmission, which would be timed. Wait for "UP".
        deadline = time.monotonic() + timeout
        for ns in self.ns.values():
            for rail in range(1, self.rails + 1):
                while True:
                    p = _admin(["ip", "-n", ns, "-j", "link", "show", "dev", self.interface(rail)])
                    if json.loads(p.stdout)[0].get("operstate") == "UP":
                        break
                    if time.monotonic() > deadline:
                        raise RailBedError(
                            f"{self.interface(rail)} in {ns} not up after {timeout} s")
                    time.sleep(0.02)

    def down(self):
        """Ends the processes started here and removes the namespaces."""
        with _live_lock:
            _live.discard(self)
        if not self._up:
            return
        self._up = False
        for p in self._procs:
            _kill(p)
        self._procs.clear()
        for ns in self.ns.values():
            _remove_namespace(ns)

    # -- shaping ----------------------------------------------------------

    def set_rate(self, rail, mbit):
        """Sets rail `rail` to `mbit` Mbit/s in both directions (None: no limit)."""
        self._check_rail(rail)
        self.rates[rail - 1] = mbit
        dev = self.interface(rail)
        for ns in self.ns.values():
            if mbit:
                burst = self.burst or burst_for(mbit)
                _admin(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
                        "rate", f"{mbit}mbit", "burst", str(burst),
                        "latency", f"{self.latency_ms}ms"])
            else:
                _admin(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)

    def set_link(self, rail, up=True):
        """Takes rail `rail` down on both sides (a lost NIC) or back up.

        Packets on a down rail are dropped; established TCP connections
        over it stall and time out after TCP's retransmissions (minutes)
        unless the program notices by itself. To cut connections at once,
        also kill them (e.g. `ss -K` inside the namespace).
        """
        self._check_rail(rail)
        for ns in self.ns.values():
            _admin(["ip", "-n", ns, "link", "set", self.interface(rail), "up" if up else "down"])

    def counters(self):
        """Bytes and packets sent per rail and side: [{"a": {...}, "b": {...}}, ...].

        Index 0 is rail 1; each side's dict has tx_bytes, rx_bytes,
        tx_packets, rx_packets (counted at the veth, headers included).
        """
        out = []
        for rail in range(1, self.rails + 1):
            entry = {}
            for side, ns in self.ns.items():
                p = _admin(["ip", "-n", ns, "-j", "-s", "link", "show", "dev",
                            self.interface(rail)])
                stats = json.loads(p.stdout)[0]["stats64"]
                entry[side] = {"tx_bytes": stats["tx"]["bytes"], "rx_bytes": stats["rx"]["bytes"],
                               "tx_packets": stats["tx"]["packets"],
                               "rx_packets": stats["rx"]["packets"]}
            out.append(entry)
        return out

    # -- running ----------------------------------------------------------

    def command(self, side, argv):
        """The argv that runs `argv` inside `side` (ip netns exec ...)."""
        return [_tool("ip") or "ip", "netns", "exec", self.ns[self._side(side)], *argv]

    def popen(self, side, argv, **kwargs):
        """Starts `argv` inside `side`; returns the Popen.

        The process gets its own session (so it and its children are ended
        together) and is killed by down() if still running. kwargs go to
        subprocess.Popen (stdout, stderr, env, cwd, text...).
        """
        self._require_up()
        kwargs.setdefault("start_new_session", True)
        p = subprocess.Popen(self.command(side, argv), **kwargs)
        self._procs.append(p)
        return p

    def run(self, side, argv, *, timeout, check=True, env=None, input=None, cwd=None):
        """Runs `argv` inside `side` to completion, at most `timeout` seconds.

        Returns the CompletedProcess (text stdout and stderr). On timeout
        the process group is killed and RailBedError raised; with check, a
        non-zero exit raises RailBedError carrying its stderr.
        """
        p = self.popen(side, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                       text=True, env=env, cwd=cwd)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(p)
            out, err = p.communicate()
            raise RailBedError(f"{' '.join(map(str, argv))} in side {side}: "
                               f"still running after {timeout} s\n{err}")
        finally:
            if p in self._procs:
                self._procs.remove(p)
        if check and p.returncode != 0:
            raise RailBedError(f"{' '.join(map(str, argv))} in side {side}: "
                               f"exit {p.returncode}\n{err}")
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    # -- helpers ----------------------------------------------------------

    def _side(self, side):
        if side not in ("a", "b"):
            raise ValueError(f"side is 'a' or 'b', not {side!r}")
        return side

    def _check_rail(self, rail):
        if not 1 <= rail <= self.rails:
            raise ValueError(f"rail {rail}: this bed has rails 1..{self.rails}")

    def _require_up(self):
        if not self._up:
            raise RailBedError("the bed is not up")

    def __repr__(self):
        return f"RailBed(id={self.id!r}, rates={self.rates}, up={self._up})"


def _kill(p):
    """Kills a process started by popen() and its session; reaps it."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            p.kill()
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------- raw_stream


def build_raw_stream(outdir=None):
    """Compiles benches/rails/raw_stream.c (cc -O2 -pthread) once; returns its path.

    outdir defaults to build/railbed/ in the repository; the binary is
    rebuilt when the source is newer.
    """
    outdir = Path(outdir) if outdir else ROOT / "build" / "railbed"
    outdir.mkdir(parents=True, exist_ok=True)
    exe = outdir / "raw_stream"
    if exe.exists() and exe.stat().st_mtime >= RAW_STREAM_SOURCE.stat().st_mtime:
        return exe
    cc = os.environ.get("CC", "cc")
    tmp = outdir / f"raw_stream.{os.getpid()}.tmp"
    try:
        subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-std=c11", "-pthread",
                        str(RAW_STREAM_SOURCE), "-o", str(tmp)],
                       check=True, timeout=60, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        raise RailBedError(f"building raw_stream failed:\n{e.stderr}")
    os.replace(tmp, exe)  # atomic: a concurrent build never sees half a file
    return exe


def _parse(line):
    """'send bytes=1 MB/s=2.5 shares=0.5,0.5' -> {'bytes': 1, 'MB/s': 2.5, ...}."""
    out = {}
    for tok in line.split()[1:]:
        key, _, value = tok.partition("=")
        if key == "shares":
            out[key] = [float(x) for x in value.split(",")]
        elif key == "policy":
            out[key] = value
        else:
            out[key] = float(value) if "." in value else int(value)
    return out


def raw_stream(bed, nbytes, chunk=1 << 20, *, rails=None, policy="round_robin",
               sender="a", port=5201, timeout=30.0, exe=None):
    """One raw_stream transfer from `sender` to the other side; returns its figures.

    nbytes striped in `chunk` pieces over one TCP connection per rail in
    `rails` (default: all, in order; [1] is a single plain stream) under
    `policy`. Returns the sender's line as a dict: bytes, chunk, rails,
    policy, seconds, MB/s, Mbit/s, shares (per connection), plus
    "recv_MB/s" (the receiver's first-to-last-byte rate).
    """
    exe = str(exe or build_raw_stream())
    rails = list(rails or range(1, bed.rails + 1))
    receiver = "b" if sender == "a" else "a"
    ports = [port + i for i in range(len(rails))]
    rx = bed.popen(receiver, [exe, "recv", *map(str, ports)],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait until every port is bound (raw_stream also retries refused
        # connections for 5 s; waiting here keeps that out of the timing).
        # Read the raw fd, not the buffered file: a buffered readline could
        # swallow the second "listening" line while select() waits on the fd.
        deadline = time.monotonic() + 5
        early = b""
        while early.count(b"listening") < len(ports):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rx.stdout], [], [], left)[0]:
                raise RailBedError("raw_stream recv did not start listening in 5 s")
            data = os.read(rx.stdout.fileno(), 4096)
            if not data:
                raise RailBedError(f"raw_stream recv exited: {rx.stderr.read()}")
            early += data
        targets = ",".join(f"{bed.addr(receiver, r)}:{p}" for r, p in zip(rails, ports))
        tx = bed.run(sender, [exe, "send", targets, str(nbytes), str(chunk), policy],
                     timeout=timeout)
        try:
            out, err = rx.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            raise RailBedError("raw_stream recv did not finish after the sender")
        if rx.returncode != 0:
            raise RailBedError(f"raw_stream recv: exit {rx.returncode}\n{err}")
    finally:
        _kill(rx)
        if rx in bed._procs:
            bed._procs.remove(rx)
    result = _parse(tx.stdout.strip().splitlines()[-1])
    recv_line = [ln for ln in out.splitlines() if ln.startswith("recv ")]
    if recv_line:
        result["recv_MB/s"] = _parse(recv_line[-1])["MB/s"]
    return result


def measure(bed, nbytes=None, chunk=1 << 20, policies=("round_robin", "least_used")):
    """The bed's raw figures: each rail alone, then all rails under each policy.

    nbytes defaults to about 1.5 s at the slowest single rail. Returns
    {"rail1": {...}, ..., "round_robin": {...}, "least_used": {...}} with
    raw_stream()'s dicts; meant to run in the same session as the Tether
    figures it is compared with.
    """
    out = {}
    for rail in range(1, bed.rails + 1):
        rate = bed.rates[rail - 1] or 1000
        n = nbytes or max(chunk, int(rate * 1e6 / 8 * 1.5) // chunk * chunk)
        out[f"rail{rail}"] = raw_stream(bed, n, chunk, rails=[rail])
    if bed.rails > 1:
        total = sum(r or 1000 for r in bed.rates)
        # A whole number of chunks per rail, so round_robin's equal shares
        # are exactly equal (an odd chunk out would be timed on one rail).
        unit = chunk * bed.rails
        n = nbytes or max(unit, int(total * 1e6 / 8 * 1.5) // unit * unit)
        for policy in policies:
            out[policy] = raw_stream(bed, n, chunk, policy=policy)
    return out


# --------------------------------------------------------------------- CLI


def _rates(text):
    return [None if x in ("0", "none", "") else int(x) for x in text.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="railbed.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("up", "run", "measure"):
        p = sub.add_parser(name)
        p.add_argument("--rates", type=_rates, default=None,
                       help="Mbit/s per rail, e.g. 500,250 (default: 200 per rail)")
        p.add_argument("--rails", type=int, default=2, help="rails when --rates is not given")
        p.add_argument("--burst", type=int, default=None, help="tbf burst in bytes")
        p.add_argument("--latency", type=int, default=DEFAULT_LATENCY_MS, help="tbf latency, ms")
    sub.choices["up"].add_argument("--name", default=None,
                                   help="bed id (default up<pid>); namespaces railbed-ID-a/-b")
    sub.choices["run"].add_argument("--side", choices=("a", "b"), default=None,
                                    help="run CMD inside this side (default: in the root "
                                         "namespace, with RAILBED_* set)")
    sub.choices["run"].add_argument("--timeout", type=float, default=600)
    sub.choices["run"].add_argument("argv", nargs=argparse.REMAINDER)
    sub.choices["measure"].add_argument("--bytes", type=int, default=None)
    sub.choices["measure"].add_argument("--chunk", type=int, default=1 << 20)
    down = sub.add_parser("down", help="remove beds left by up or by killed runs")
    down.add_argument("--name", default=None, help="remove only this bed")
    down.add_argument("--all", action="store_true", help="also beds of live programs")
    sub.add_parser("check", help="say whether a bed can be made here")
    args = ap.parse_args(argv)

    if args.cmd == "check":
        ok, why = available()
        print("rail test bed: available" if ok else why)
        return 0 if ok else 1
    if args.cmd == "down":
        if args.name:
            for ns in list_beds().get(args.name, []):
                _remove_namespace(ns)
            removed = [args.name]
        else:
            removed = cleanup_leftovers(everything=args.all, kept=True)
        print(f"removed: {' '.join(removed) or 'nothing'}")
        return 0

    ok, why = available()
    if not ok:
        print(why, file=sys.stderr)
        return 77  # "skipped", as automake's test drivers read it
    rates = args.rates or [200] * args.rails
    if args.cmd == "up":
        bed = RailBed(rates, name=args.name or f"up{os.getpid()}", burst=args.burst,
                      latency_ms=args.latency, keep=True).up()
        for k, v in bed.env().items():
            print(f"{k}={v}")
        return 0
    with RailBed(rates, burst=args.burst, latency_ms=args.latency) as bed:
        if args.cmd == "measure":
            for key, r in measure(bed, args.bytes, args.chunk).items():
                print(f"{key:12s} {r['Mbit/s']:8.1f} Mbit/s  {r['MB/s']:7.2f} MB/s  "
                      f"shares {','.join(f'{s:.2f}' for s in r['shares'])}")
            return 0
        cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not cmd:
            ap.error("run needs a command after --")
        env = {**os.environ, **bed.env()}
        argv = bed.command(args.side, cmd) if args.side else cmd
        p = subprocess.Popen(argv, env=env, start_new_session=False)
        try:
            return p.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print(f"railbed.py run: {cmd[0]} still running after {args.timeout} s", file=sys.stderr)
            return 124
        except KeyboardInterrupt:
            p.kill()
            p.wait()
            return 130


if __name__ == "__main__":
    sys.exit(main())
