#!/usr/bin/env python3
"""A simulated join of N processes at one rendezvous server: synthetic
clients, one TCP connection each, all in this process (a selector loop),
play what a process of a one-program run does at start-up: rank 0 puts
the program's size; every other rank waits for it; each puts its address
and then waits for its two neighbours' addresses (a ring), as a process
that contacts only those. The server is `tether rendezvous serve` of the
build named (so two builds can be compared in one run).

Prints, per N: the wall time of the whole join, the median and max join
time per client (connect to last answer), the rendezvous operations in
all and per client, and the server's CPU time (from /proc).

    python3 benches/rendezvous/join_load.py [--tether build/bin/tether] [--sizes 1024,4096,16384]
"""

import argparse
import os
import resource
import selectors
import socket
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def server_cpu_s(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    def __init__(self, rank, n):
        self.rank, self.n = rank, n
        left, right = (rank - 1) % n, (rank + 1) % n
        steps = []
        if rank == 0:
            steps.append(f"PUT size/sim {n} nonce=0000000000000001\n")
        else:
            steps.append("WAIT size/sim 60000\n")
        steps.append(f"PUT addr/sim/{rank} tcp=10.0.{rank // 256}.{rank % 256}:5000 host=h{rank} pid={rank}\n")
        for peer in sorted({left, right} - {rank}):
            steps.append(f"WAIT addr/sim/{peer} 60000\n")
        self.steps, self.done, self.buf = steps, 0, b""
        self.sock = None
        self.started = self.ended = None


def run(url, n):
    host, port = url.removeprefix("tcp://").rsplit(":", 1)
    addr = (host, int(port))
    sel = selectors.DefaultSelector()
    clients = [Client(r, n) for r in range(n)]
    # Rank 0 first; at most 512 connects in progress at once (the rest of
    # a launch's processes start while the first are still connecting).
    pending = list(reversed(range(n)))
    connecting = 0
    finished = 0
    ops = 0
    start = time.monotonic()
    while finished < n:
        while pending and connecting < 512:
            c = clients[pending.pop()]
            c.sock = socket.socket()
            c.sock.setblocking(False)
            c.started = time.monotonic()
            c.sock.connect_ex(addr)
            sel.register(c.sock, selectors.EVENT_WRITE, c)
            connecting += 1
        for key, events in sel.select(timeout=1):
            c = key.data
            if events & selectors.EVENT_WRITE:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise SystemExit(f"client {c.rank}: connect failed: {os.strerror(err)}")
                connecting -= 1
                c.sock.sendall(c.steps[0].encode())
                ops += 1
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            data = c.sock.recv(65536)
            if not data:
                raise SystemExit(f"client {c.rank}: the server closed the connection")
            c.buf += data
            while b"\n" in c.buf:
                line, c.buf = c.buf.split(b"\n", 1)
                if not (line.startswith(b"OK") or line.startswith(b"VALUE")):
                    raise SystemExit(f"client {c.rank}: {c.steps[c.done].strip()!r} answered {line!r}")
                c.done += 1
                if c.done == len(c.steps):
                    c.ended = time.monotonic()
                    sel.unregister(c.sock)
                    c.sock.close()
                    finished += 1
                else:
                    c.sock.sendall(c.steps[c.done].encode())
                    ops += 1
    wall = time.monotonic() - start
    joins = [c.ended - c.started for c in clients]
    return wall, statistics.median(joins), max(joins), ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tether", default=str(ROOT / "build" / "bin" / "tether"))
    parser.add_argument("--sizes", default="1024,4096,16384")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"server: {args.tether} rendezvous serve")
    print("| N | whole join, s | join per client, median / max, ms | operations (per client) | server CPU, s |")
    print("|---:|---:|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        server = subprocess.Popen([args.tether, "rendezvous", "serve"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, env=env,
                                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)))
        try:
            url = server.stdout.readline().strip()
            before = server_cpu_s(server.pid)
            wall, median, worst, ops = run(url, n)
            cpu = server_cpu_s(server.pid) - before
        finally:
            server.kill()
            server.wait()
        print(f"| {n:,} | {wall:.2f} | {median * 1e3:.1f} / {worst * 1e3:.1f} | {ops:,} ({ops / n:.1f}) | {cpu:.2f} |")


if __name__ == "__main__":
    main()
