"""One-sided operations from Python (tether.Win) between every process of a
universe of two programs (3 or more processes), over tether.UNIVERSE.

    python rma_suite.py SCENARIO

Scenarios (each process prints "ok SCENARIO" when all its checks passed):
  putget      windows of different sizes (rank 1's is 0 bytes); every origin
              puts and gets 0 B to 1 MiB to every other rank, blocking and
              by request, byte-exact after a flush; an origin dropped right
              after Put (the window keeps it alive); a put checked by its
              target after a fence; a 2-D float64 origin;
  accumulate  SUM on int64 (with wrap-around) and float64, REPLACE, from
              every rank into rank 0, checked after a fence;
  atomics     200 Fetch_and_op per rank on one counter (final value exact,
              every fetched value distinct), NO_OP reads it; a
              Compare_and_swap lock around a non-atomic Get/Put increment
              (no lost update);
  range       out-of-window accesses raise RmaRangeError with the target's
              memory byte-identical; invalid pairs, wrong result buffers,
              read-only and non-contiguous buffers refused; a freed window
              raises ArgError; the context manager frees.
"""

import sys

import numpy as np

import tether

SIZES = [0, 1, 7, 4096, 65536, 1 << 20]
WINDOW = (1 << 20) + 4096


def pattern(origin, target, n):
    return np.random.default_rng(origin * 1000003 + target * 1009 + n).integers(0, 256, n, dtype=np.uint8)


def window_bytes(rank):
    return 0 if rank == 1 else WINDOW


def check_every_target(win, me, size):
    for t in range(size):
        if t == me or window_bytes(t) == 0:
            continue
        for k, n in enumerate(SIZES):
            offset = (k % 2) * 4096 % (WINDOW - n + 1)
            out = pattern(me, t, n)
            back = np.zeros(n, dtype=np.uint8)
            if k % 2:
                win.Rput(out, t, offset).wait()
                win.Flush(t)
                win.Rget(back, t, offset).wait()
            else:
                win.Put(out, t, offset)
                win.Flush(t)
                win.Get(back, t, offset)
                win.Flush_all()
            assert back.tobytes() == out.tobytes(), f"{n} bytes read back from rank {t} differ"
        # The origin is dropped at once: the window holds it until the flush.
        win.Put(pattern(me, t, 65536) + 0, t, 0)
        back = np.zeros(65536, dtype=np.uint8)
        win.Flush(t)
        win.Get(back, t, 0)
        win.Flush(t)
        assert back.tobytes() == pattern(me, t, 65536).tobytes(), f"dropped origin to rank {t}"


def putget(comm):
    me, size = comm.rank, comm.size
    mem = np.zeros(window_bytes(me), dtype=np.uint8)
    win = tether.Win(mem, comm)
    # Origins take turns (the others serve them from inside Barrier).
    for origin in range(size):
        if origin == me:
            check_every_target(win, me, size)
        comm.Barrier()
    win.Fence()

    # Each rank writes into the next non-empty window; the target checks
    # after the fence (rank 1's window is empty: ranks 0 and 1 write into
    # rank 2, each at 4096 * its rank).
    def next_of(r):
        t = (r + 1) % size
        return t if window_bytes(t) else (t + 1) % size

    win.Put(pattern(me, next_of(me), 4096), next_of(me), 4096 * me)
    win.Fence()
    for origin in range(size):
        if origin != me and next_of(origin) == me:
            got = mem[4096 * origin : 4096 * (origin + 1)]
            assert got.tobytes() == pattern(origin, me, 4096).tobytes(), f"fenced put from {origin}"
    win.Free()
    assert win.handle == tether.WIN_NULL and win.array is None

    # A float64 window, a 2-D origin, offsets in bytes.
    a = np.full(6 * size, -1.0)
    with tether.Win(a, comm) as fwin:
        t = (me + 1) % size
        fwin.Put(np.arange(6.0).reshape(2, 3) + 10 * me, t, 8 * 6 * me)
        fwin.Fence()
        prev = (me - 1) % size
        expect = np.full(6 * size, -1.0)
        expect[6 * prev : 6 * prev + 6] = np.arange(6.0) + 10 * prev
        assert np.array_equal(a, expect), a
        assert fwin.array is a
    assert fwin.handle == tether.WIN_NULL


def accumulate(comm):
    me, size = comm.rank, comm.size
    ints = np.zeros(4, dtype=np.int64)
    ints[2] = np.iinfo(np.int64).max
    floats = np.zeros(4)
    iwin, fwin = tether.Win(ints, comm), tether.Win(floats, comm)
    iwin.Accumulate(np.array([me + 1, -(me + 1), 1], dtype=np.int64), 0, 0, op=tether.SUM)
    fwin.Accumulate(np.array([me + 0.5, -0.25 * me]), 0, 8)
    iwin.Accumulate(np.array([7], dtype=np.int64), 0, 24, op=tether.REPLACE)
    iwin.Fence()
    fwin.Fence()
    if me == 0:
        total = size * (size + 1) // 2
        wrapped = np.iinfo(np.int64).min + size - 1  # max + size wraps around
        assert ints.tolist() == [total, -total, wrapped, 7], ints
        assert floats[1] == sum(r + 0.5 for r in range(size)), floats
        assert floats[2] == sum(-0.25 * r for r in range(size)), floats
        assert floats[0] == 0 and floats[3] == 0, floats
    iwin.Free()
    fwin.Free()


def atomics(comm):
    me, size = comm.rank, comm.size
    cells = np.zeros(4, dtype=np.int64)  # counter, lock, value
    win = tether.Win(cells, comm)
    owner = size - 1
    one = np.ones(1, dtype=np.int64)
    got = []
    for _ in range(200):
        fetched = np.zeros(1, dtype=np.int64)
        win.Fetch_and_op(one, fetched, owner, 0, op=tether.SUM)
        win.Flush(owner)
        got.append(int(fetched[0]))
    everyone = sorted(v for vs in comm.allgather(got) for v in vs)
    assert everyone == list(range(200 * size)), "fetched values are not distinct"
    win.Fence()
    if me == owner:
        assert cells[0] == 200 * size, cells
    now = np.zeros(1, dtype=np.int64)
    win.Fetch_and_op(None, now, owner, 0, op=tether.NO_OP)
    win.Flush(owner)
    assert now[0] == 200 * size, now

    # A lock at rank 0's cells[1] around a non-atomic read-modify-write of
    # cells[2]: no increment is lost.
    mine, free_, old = np.array([me + 1], np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
    value = np.zeros(1, np.int64)
    for _ in range(20):
        while True:
            win.Compare_and_swap(mine, free_, old, 0, 8)
            win.Flush(0)
            if old[0] == 0:
                break
        win.Get(value, 0, 16)
        win.Flush(0)
        win.Put(value + 1, 0, 16)
        win.Flush(0)
        win.Compare_and_swap(free_, mine, old, 0, 8)
        win.Flush(0)
        assert old[0] == me + 1, old
    win.Fence()
    if me == 0:
        assert cells[1] == 0 and cells[2] == 20 * size, cells
    win.Free()


def expect_error(kind, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except kind as e:
        return e
    raise AssertionError(f"{call.__name__}{args} did not raise {kind.__name__}")


def range_checks(comm):
    me, size = comm.rank, comm.size
    mem = np.arange(1000, dtype=np.uint8) if me != 1 else np.zeros(0, dtype=np.uint8)
    original = mem.copy()
    win = tether.Win(mem, comm)
    out = np.full(16, 0xEE, dtype=np.uint8)
    for t in range(size):
        if t == me:
            continue
        if t == 1:
            expect_error(tether.RmaRangeError, win.Put, out[:1], t, 0)
            continue
        e = expect_error(tether.RmaRangeError, win.Put, out[:8], t, 997)
        assert e.code == tether.ERR_RMA_RANGE and "window" in str(e), e
        expect_error(tether.RmaRangeError, win.Put, out[:1], t, -1)
        expect_error(tether.RmaRangeError, win.Get, np.zeros(2, np.int64), t, 990)
        try:
            win.Rget(np.zeros(16, np.uint8), t, 990).wait()
        except tether.RmaRangeError:
            pass
        else:
            raise AssertionError("Rget past the end")
        r = np.zeros(1, np.int64)
        expect_error(tether.RmaRangeError, win.Fetch_and_op, np.ones(1, np.int64), r, t, 4)
        expect_error(tether.OpError, win.Accumulate, np.zeros(2), t, 0, op=tether.BAND)
        expect_error(tether.DatatypeError, win.Compare_and_swap, np.ones(1), np.ones(1), np.ones(1), t, 0)
        win.Put(out[:0], t, 1000)  # zero bytes at the end: legal
    # Refused before anything is sent.
    r = np.zeros(1, np.int64)
    expect_error(TypeError, win.Fetch_and_op, np.ones(1, np.int32), r, 0, 0)
    expect_error(ValueError, win.Fetch_and_op, np.ones(2, np.int64), np.zeros(2, np.int64), 0, 0)
    expect_error(ValueError, win.Fetch_and_op, None, r, 0, 0, op=tether.SUM)
    ro = np.zeros(8, np.uint8)
    ro.setflags(write=False)
    e = expect_error(ValueError, win.Get, ro, 0, 0)
    assert "read-only" in str(e), e
    e = expect_error(ValueError, win.Put, np.zeros(16, np.uint8)[::2], 0, 0)
    assert "not contiguous" in str(e), e
    expect_error(TypeError, win.Put, 42, 0, 0)
    expect_error(tether.RankError, win.Put, out, size, 0)
    win.Fence()
    assert mem.tobytes() == original.tobytes(), "refused accesses changed the window"
    win.Free()
    expect_error(tether.ArgError, win.Put, out, 0, 0)
    expect_error(tether.ArgError, win.Flush, 0)

    # Windows themselves: read-only or non-contiguous memory is refused at
    # once, on every process alike (nothing collective starts).
    ro = np.zeros(8)
    ro.setflags(write=False)
    assert "read-only" in str(expect_error(ValueError, tether.Win, ro, comm))
    assert "not contiguous" in str(expect_error(ValueError, tether.Win, np.zeros((4, 4))[:, 1], comm))
    expect_error(TypeError, tether.Win, np.zeros(4), "universe")


SCENARIOS = {"putget": putget, "accumulate": accumulate, "atomics": atomics, "range": range_checks}

if __name__ == "__main__":
    scenario = sys.argv[1]
    tether.init()
    SCENARIOS[scenario](tether.UNIVERSE)
    print(f"ok {scenario}", flush=True)
