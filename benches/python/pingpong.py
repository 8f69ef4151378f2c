"""Ping-pong latency and streaming bandwidth from Python, with numpy
buffers: the loops of benches/p2p/tether_pingpong.c (same sizes, iteration
counts, window and output lines), over Tether or, with --mpi4py, over
mpi4py, so the three read as ratios of one another.

  tether run --name a -n 1 python3 pingpong.py : --name b -n 1 python3 pingpong.py
  mpiexec -n 2 python3 pingpong.py --mpi4py

Rank 0 prints `latency <bytes> <us, half round trip>` and
`bw <bytes> <MB/s, 1 MB = 1e6 B>` lines, as the C programs do.

  python3 pingpong.py --self [ITERS]

runs alone (a universe of one) and prints `self 8 <us per Send+Recv pair>`
for 8-byte messages to itself: the calls of self_loop.c, from Python.
"""

import argparse
import sys
import time

import numpy as np

TAG_DATA, TAG_ACK = 100, 101


def lat_iters(size, given):
    return given or (10000 if size <= 8192 else 1000)


def lat_warmup(size, given):
    return given or (1000 if size <= 8192 else 100)


def bw_iters(size, given):
    return given or (50 if size <= (1 << 20) else 10)


def bw_warmup(size, given):
    return given or (5 if size <= (1 << 20) else 2)


def sizes(text):
    return [int(s) for s in text.split(",") if s]


class TetherComm:
    """The four calls the loops make, over Tether."""

    def __init__(self):
        import tether

        tether.init()
        self.comm = tether.UNIVERSE
        self.rank = self.comm.rank
        self.Send, self.Recv, self.Isend, self.Irecv = (
            self.comm.Send, self.comm.Recv, self.comm.Isend, self.comm.Irecv)
        self.waitall = tether.Request.waitall
        self.name = "tether"


class Mpi4pyComm:
    """The same calls over mpi4py (MPI.COMM_WORLD)."""

    def __init__(self):
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        c = self.comm
        self.Send = lambda buf, dest, tag: c.Send(buf, dest, tag)
        self.Recv = lambda buf, source, tag: c.Recv(buf, source, tag)
        self.Isend, self.Irecv = c.Isend, c.Irecv
        self.waitall = MPI.Request.Waitall
        self.name = f"mpi4py {sys.modules['mpi4py'].__version__} ({MPI.Get_library_version().splitlines()[0]})"


def latency(c, size, args):
    """Blocking ping-pong. Only the last ping carries the iteration mark
    (the C loop marks every one: one store in C, a numpy item assignment,
    tens of nanoseconds, in Python), so the loop times the calls alone;
    the mark seen at the end still proves the last message arrived."""
    iters, warmup = lat_iters(size, args.iters), lat_warmup(size, args.warmup)
    sbuf = (np.arange(size) * 131 + size * 7 + 1).astype(np.uint8)
    rbuf = np.zeros(size, np.uint8)
    send, recv = c.Send, c.Recv
    mark = (iters + warmup) & 0xFF
    if c.rank == 0:
        for _ in range(warmup):
            send(sbuf, 1, TAG_DATA)
            recv(rbuf, 1, TAG_DATA)
        t0 = time.perf_counter()
        for _ in range(iters - 1):
            send(sbuf, 1, TAG_DATA)
            recv(rbuf, 1, TAG_DATA)
        sbuf[0] = mark
        send(sbuf, 1, TAG_DATA)
        recv(rbuf, 1, TAG_DATA)
        t1 = time.perf_counter()
    else:
        for _ in range(iters + warmup):
            recv(rbuf, 0, TAG_DATA)
            send(rbuf, 0, TAG_DATA)
    if rbuf[0] != mark or not np.array_equal(rbuf[1:], sbuf[1:]):
        sys.exit(f"{c.name} rank {c.rank}: wrong data after the {size}-byte ping-pong")
    if c.rank == 0:
        print(f"latency {size} {(t1 - t0) * 1e6 / (2 * iters):.3f}", flush=True)


def bandwidth(c, size, args):
    iters, warmup = bw_iters(size, args.bw_iters), bw_warmup(size, args.bw_warmup)
    window = args.window
    sbuf = (np.arange(size) * 131 + size * 7 + 1).astype(np.uint8)
    rbuf = np.zeros(size, np.uint8)
    ack = np.zeros(4, np.uint8)
    t0 = 0.0
    for it in range(iters + warmup):
        if it == warmup:
            t0 = time.perf_counter()
        if c.rank == 0:
            c.waitall([c.Isend(sbuf, 1, TAG_DATA) for _ in range(window)])
            c.Recv(ack, 1, TAG_ACK)
        else:
            c.waitall([c.Irecv(rbuf, 0, TAG_DATA) for _ in range(window)])
            c.Send(ack, 0, TAG_ACK)
    t1 = time.perf_counter()
    if c.rank == 1 and not np.array_equal(rbuf, sbuf):
        sys.exit(f"{c.name} rank 1: wrong data after the {size}-byte stream")
    if c.rank == 0:
        print(f"bw {size} {size * window * iters / ((t1 - t0) * 1e6):.1f}", flush=True)


def self_loop(iters):
    """Send+Recv of 8 bytes to itself, as self_loop.c does."""
    import tether

    tether.init("self", 0, 1)
    comm = tether.UNIVERSE
    send, recv = comm.Send, comm.Recv
    s, r = np.ones(8, np.uint8), np.zeros(8, np.uint8)
    t0 = 0.0
    for i in range(iters + iters // 10):
        if i == iters // 10:
            t0 = time.perf_counter()
        send(s, 0, 1)
        recv(r, 0, 1)
    print(f"self 8 {(time.perf_counter() - t0) * 1e6 / iters:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpi4py", action="store_true", help="run over mpi4py instead of Tether")
    ap.add_argument("--self", type=int, nargs="?", const=200000, metavar="ITERS",
                    help="alone: Send+Recv to itself ITERS times (default 200000)")
    ap.add_argument("--lat", type=sizes, default=[8, 1024, 65536])
    ap.add_argument("--bw", type=sizes, default=[1 << 20, 16 << 20])
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--bw-iters", type=int, default=0)
    ap.add_argument("--bw-warmup", type=int, default=0)
    ap.add_argument("--window", type=int, default=64)
    args = ap.parse_args()
    if args.self:
        return self_loop(args.self)
    c = Mpi4pyComm() if args.mpi4py else TetherComm()
    if c.rank == 0:
        print(f"# python pingpong over {c.name}, window {args.window}", flush=True)
    if c.rank < 2:
        for size in args.lat:
            latency(c, size, args)
        for size in args.bw:
            bandwidth(c, size, args)


if __name__ == "__main__":
    main()
