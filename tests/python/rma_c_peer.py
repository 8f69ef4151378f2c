"""The Python side of tests/c/rma_py_peer.c (program `pymodel`), the same
steps with tether.Win: puts, accumulate on int64 and float64, a
fetch_and_op counter and compare_and_swap between a C and a Python
program, each side checking its own numpy windows after a fence. Prints
"ok c-python rma"."""

import numpy as np

import tether

tether.init()
comm = tether.UNIVERSE
u, size = comm.rank, comm.size
n = size // 2
partner = (u + n) % size
other0 = n if u < n else 0

w = np.zeros(64, dtype=np.int64)
d = np.zeros(8, dtype=np.float64)
win = tether.Win(w, comm)
dwin = tether.Win(d, comm)

out = u * 1000 + np.arange(8, dtype=np.int64)
win.Put(out, partner, 0)
win.Flush(partner)

for t in range(other0, other0 + n):
    win.Accumulate(np.array([u + 1], dtype=np.int64), t, 16 * 8, op=tether.SUM)
    dwin.Accumulate(np.array([0.5 * (u + 1)]), t, 0)
one, fetched, last = np.ones(1, np.int64), np.zeros(1, np.int64), -1
for _ in range(10):
    win.Fetch_and_op(one, fetched, other0, 20 * 8, op=tether.SUM)
    win.Flush(other0)
    assert last < fetched[0] < 10 * n, (fetched, last)
    last = int(fetched[0])
win.Fence()
dwin.Fence()

total = sum(v + 1 for v in range(other0, other0 + n))
assert np.array_equal(w[:8], partner * 1000 + np.arange(8)), w[:8]
assert w[16] == total, (w[16], total)
assert d[0] == 0.5 * total, (d[0], total)
if u in (0, n):
    assert w[20] == 10 * n, w[20]

back = np.zeros(8, np.int64)
old, now = np.full(1, -1, np.int64), np.full(1, -1, np.int64)
win.Get(back, partner, 0)
win.Compare_and_swap(np.array([u + 1], np.int64), np.zeros(1, np.int64), old, partner, 24 * 8)
win.Flush(partner)
win.Get(now, partner, 24 * 8)
win.Flush_all()
assert np.array_equal(back, out), back
assert old[0] == 0 and now[0] == u + 1, (old, now)

win.Free()
dwin.Free()
print("ok c-python rma", flush=True)
