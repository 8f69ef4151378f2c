"""Rendezvous by remote memory: universe rank 0 sends 1 MiB to rank 1,
which checks every byte; both print what their counters say they wrote
into (bytes_put) and read from (bytes_got) the other's memory."""

import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, other = world.rank, 1 - world.rank
data = np.arange(1 << 18, dtype=np.uint32)
if me == 0:
    world.Send(data, 1, tag=7)
else:
    got = np.zeros_like(data)
    world.Recv(got, 0, tag=7)
    assert np.array_equal(got, data), "the message arrived changed"
world.Barrier()
stats = tether.stats()
peer = f"peer.{other}.{sys.argv[1]}"
print(f"remote {me} put {stats[peer + '.bytes_put']} got {stats[peer + '.bytes_got']}", flush=True)
tether.finalize()
