"""First contact over shared memory: every other rank sends to rank 0,
which receives from any source and answers each. Rank 0 reached each
peer first through the ring the peer opened into its segment, so its
answer's route settles at once, with no address to look up in the
rendezvous: `route_waits` stays 0. (Before, the answer waited for the
address, and the round that settled the route then slept its full 100 ms
before sending.)"""

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
buf = np.zeros(1, dtype=np.int64)
if world.rank == 0:
    for _ in range(world.size - 1):
        status = world.Recv(buf, tether.ANY_SOURCE, 1)
        assert buf[0] == status.source, (buf[0], status.source)
        world.Send(buf, status.source, tag=2)
    waits = tether.stats()["route_waits"]
    assert waits == 0, f"rank 0 waited for {waits} routes it had already reached"
else:
    buf[0] = world.rank
    world.Send(buf, 0, tag=1)
    world.Recv(buf, 0, tag=2)
    assert buf[0] == world.rank
print(f"ok first contact {world.rank}", flush=True)
