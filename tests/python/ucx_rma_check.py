"""Window operations between two processes: universe rank 0 puts 64 KiB
into rank 1's window and reads it back, then adds to and swaps an int64
of it atomically; both print what their counters say went into
(bytes_put) and out of (bytes_got) the other's memory by remote key
(a transport's own put, get or atomic), rather than as frames the
target applied."""

import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, other = world.rank, 1 - world.rank
memory = np.zeros(8 + (1 << 16), dtype=np.uint8)
win = tether.Win(memory, world)
pattern = np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)
if me == 0:
    win.Put(pattern, 1, 8)
    win.Flush(1)
    back = np.zeros_like(pattern)
    win.Get(back, 1, 8)
    win.Flush(1)
    assert np.array_equal(back, pattern), "the window read back differs"
    before = np.zeros(1, dtype=np.int64)
    win.Fetch_and_op(np.array([5], np.int64), before, 1, 0, op=tether.SUM)
    win.Flush(1)
    assert before[0] == 0, before
    win.Compare_and_swap(np.array([9], np.int64), np.array([5], np.int64), before, 1, 0)
    win.Flush(1)
    assert before[0] == 5, before
win.Fence()
if me == 1:
    assert np.array_equal(memory[8:], pattern), "the put did not land"
    assert memory[:8].view(np.int64)[0] == 9, memory[:8]
win.Free()
stats = tether.stats()
peer = f"peer.{other}.{sys.argv[1]}"
print(f"rma {me} put {stats[peer + '.bytes_put']} got {stats[peer + '.bytes_got']}", flush=True)
tether.finalize()
