#!/usr/bin/env python3
"""How long a survivor waits before a silent or dead peer is lost, per
transport: two processes (tests/c/silent_peer.c, scenario `recv`)
launched on a rendezvous directory, the survivor waiting for a receive
from the victim; the victim is stopped (SIGSTOP) or killed (SIGKILL), and
the time from the signal to the survivor's TETHER_ERR_PEER_LOST line is
recorded. Prints the median and maximum per transport and signal.

--margin also runs the `compute` scenario (the victim computes outside
Tether for several timeouts) next to --load busy processes and reports
the longest a watched peer went unheard before it answered, from the
survivor's log: the margin a healthy peer kept against the timeout.

Usage: python3 benches/liveness/detect.py [--runs 20] [--timeout 2]
           [--transports tcp,shm,file,hybrid] [--signals stop,kill]
           [--margin] [--load 4]   (--signals '' runs only --margin)
Needs `make build` first.
"""

import argparse
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
LIB = ROOT / "build" / "lib"
TRANSPORTS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    "file": {"TETHER_TRANSPORTS": "file"},
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "4096"},
}
SIGNALS = {"stop": signal.SIGSTOP, "kill": signal.SIGKILL}


def build(tmp):
    out = Path(tmp) / "silent_peer"
    subprocess.run(["cc", "-O2", "-std=c11", "-I", str(ROOT / "include"), "-I", str(ROOT / "tests" / "c"),
                    str(ROOT / "tests" / "c" / "silent_peer.c"), "-o", str(out), "-L", str(LIB), "-ltether",
                    f"-Wl,-rpath,{LIB}"], check=True)
    return str(out)


def launch(prog, rdv, scenario, nbytes, timeout, env, extra=()):
    procs, lines = [], []
    for rank in range(2):
        e = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        e.update(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM="live", TETHER_RANK=str(rank), TETHER_SIZE="2",
                 TETHER_PEER_TIMEOUT=str(timeout), TETHER_FINALIZE_TIMEOUT="5", **env)
        p = subprocess.Popen([prog, scenario, str(nbytes), *extra], env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        q = queue.Queue()
        threading.Thread(target=lambda p=p, q=q: [q.put(line) for line in p.stdout] + [q.put(None)],
                         daemon=True).start()
        procs.append(p)
        lines.append(q)
    return procs, lines


def wait_line(q, prefix, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if line is None:
            break
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"no {prefix!r} within {within} s")


def kill(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def detect_once(prog, transport, sig, timeout):
    with tempfile.TemporaryDirectory() as rdv:
        procs, lines = launch(prog, rdv, "recv", 64, timeout, TRANSPORTS[transport])
        try:
            wait_line(lines[0], "ready", 60)
            wait_line(lines[1], "ready", 60)
            time.sleep(0.2)  # both waits are under way
            procs[1].send_signal(SIGNALS[sig])
            start = time.monotonic()
            wait_line(lines[0], "lost ", timeout + 60)
            return time.monotonic() - start
        finally:
            kill(procs)


def margin(prog, transport, timeout, load):
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        with tempfile.TemporaryDirectory() as rdv:
            env = dict(TRANSPORTS[transport], TETHER_LOG_LEVEL="info")
            procs, lines = launch(prog, rdv, "compute", 1024, timeout, env, (str(3 * timeout),))
            try:
                wait_line(lines[0], "compute ok", 3 * timeout + 120)
                _, err = procs[0].communicate(timeout=60)
            finally:
                kill(procs)
    finally:
        kill(busy)
    m = re.search(r"went unheard before it answered was (\d+) ms \(pings every (\d+) ms", err)
    return (int(m.group(1)), int(m.group(2))) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=2, help="TETHER_PEER_TIMEOUT, seconds")
    ap.add_argument("--transports", default="tcp,shm,file,hybrid")
    ap.add_argument("--signals", default="stop,kill")
    ap.add_argument("--margin", action="store_true")
    ap.add_argument("--load", type=int, default=4, help="busy processes beside --margin's pair")
    args = ap.parse_args()
    transports = args.transports.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        prog = build(tmp)
        print(f"TETHER_PEER_TIMEOUT={args.timeout}, {args.runs} runs each, {os.cpu_count()} CPUs\n")
        print("| transport | signal | median s | max s | min s |")
        print("|---|---|---|---|---|")
        for sig in filter(None, args.signals.split(",")):
            for transport in transports:
                times = [detect_once(prog, transport, sig, args.timeout) for _ in range(args.runs)]
                print(f"| {transport} | {sig} | {statistics.median(times):.2f} | {max(times):.2f} | "
                      f"{min(times):.2f} |", flush=True)
        if args.margin:
            print(f"\nlongest a computing peer went unheard ({args.load} busy processes beside):\n")
            print("| transport | longest unheard ms | ping period ms |")
            print("|---|---|---|")
            for transport in transports:
                found = margin(prog, transport, args.timeout, args.load)
                shown = found if found else ("n/a (heartbeat files)" if transport == "file" else "not reported", "")
                print(f"| {transport} | {shown[0]} | {shown[1]} |", flush=True)


if __name__ == "__main__":
    main()
