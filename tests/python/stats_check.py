"""Counters (tether.stats, TETHER_STATS): universe rank 0 sends 3 eager
messages of 100 bytes and one of 1 MiB (rendezvous) to rank 1, blocking
and non-blocking; both check what their counters say about the other."""

import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, other = world.rank, 1 - world.rank
small, big = np.arange(100, dtype=np.uint8), np.zeros(1 << 20, dtype=np.uint8)
if me == 0:
    world.Send(small, 1, tag=1)
    world.Isend(small, 1, tag=2).wait()
    world.Send(small, 1, tag=3)
    world.Send(big, 1, tag=4)
else:
    for tag in (3, 1, 2):  # tag 3 first: 1 and 2 wait unexpected meanwhile
        world.Recv(small, 0, tag=tag)
    world.Recv(big, 0, tag=4)

stats = tether.stats()
transport = sys.argv[1]
peer = f"peer.{other}.{transport}"
want_bytes = 3 * 100 + (1 << 20)
if me == 0:
    got = {k: stats[f"{peer}.{k}"] for k in ("messages_sent", "bytes_sent", "eager_sent", "rendezvous_sent")}
    assert got == {"messages_sent": 4, "bytes_sent": want_bytes, "eager_sent": 3, "rendezvous_sent": 1}, got
    assert stats[f"{transport}.bytes_sent"] >= want_bytes and stats["bytes_sent"] >= want_bytes, stats
else:
    got = {k: stats[f"{peer}.{k}"] for k in ("messages_received", "bytes_received")}
    assert got == {"messages_received": 4, "bytes_received": want_bytes}, got
    assert stats["unexpected_now"] == 0, stats
    assert stats["blocked_ns"] >= 0 and "unexpected_max" in stats, stats
assert stats["connect_retries"] >= 0, stats
# The links in force now, as tether.hint_get("LINKS") says them: the same
# totals as the counters (read again: the link memory moves).
links = dict(word.split("=") for word in tether.hint_get("LINKS").split())
again = tether.stats()
assert int(links["links"]) == again["links"] >= 1, (links, again)
assert int(links[f"{transport}.links"]) == again[f"{transport}.links"], (links, again)
assert not any(k.startswith("peer.") for k in links), links
print(f"ok stats {me} {len(stats)} counters", flush=True)
tether.finalize()
