"""Window puts and gets between two processes: universe rank 0 puts 64
KiB into rank 1's window and reads it back, then both print what their
counters say went into (bytes_put) and out of (bytes_got) the other's
memory by remote key rather than as frames the target applied."""

import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, other = world.rank, 1 - world.rank
memory = np.zeros(1 << 16, dtype=np.uint8)
win = tether.Win(memory, world)
if me == 0:
    out = np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)
    win.Put(out, 1, 0)
    win.Flush(1)
    back = np.zeros_like(out)
    win.Get(back, 1, 0)
    win.Flush(1)
    assert np.array_equal(back, out), "the window read back differs"
win.Fence()
if me == 1:
    assert np.array_equal(memory, np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)), "the put did not land"
win.Free()
stats = tether.stats()
peer = f"peer.{other}.{sys.argv[1]}"
print(f"rma {me} put {stats[peer + '.bytes_put']} got {stats[peer + '.bytes_got']}", flush=True)
tether.finalize()
