"""A stream of random sizes between every pair of processes under
TETHER_MAX_LINKS: connections are retired and dialled again in the
middle of it, and every message arrives once, intact and in order per
sender (MPI's non-overtaking rule). Then a kernel: the peers it used
keep their links while the others are retired.

Arguments: messages each process sends. Prints `ok retire <rank>
<retires> <links> mailbox <records sent> <records received>` (the
shared-memory mailbox's records: the frames that went without a ring)."""

import os
import random
import re
import sys
import time

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, n = world.rank, world.size
count = int(sys.argv[1])
# Eager and rendezvous sizes (the eager limit is 64 KiB by default).
SIZES = [8, 8, 200, 5000, 70000, 300000]
TAG = 1


def schedule(rank):
    """What `rank` sends, in order: (destination, bytes)."""
    rng = random.Random(7919 * (rank + 1))
    out = []
    for _ in range(count):
        dest = rng.randrange(n - 1)
        out.append((dest + (dest >= rank), rng.choice(SIZES)))
    return out


def message(src, seq, size):
    body = ((np.arange(size, dtype=np.uint32) * 7 + src * 13 + seq) % 251).astype(np.uint8)
    body[:8] = np.frombuffer(np.int64(seq).tobytes(), dtype=np.uint8)
    return body


# What each sender sends this process, in its order: [(seq, size)].
expected = {}
for src in range(n):
    if src != me:
        expected[src] = [(seq, size) for seq, (dest, size) in enumerate(schedule(src)) if dest == me]
next_of = {src: 0 for src in expected}
left = sum(len(v) for v in expected.values())
buf = np.zeros(max(SIZES), dtype=np.uint8)


def receive_one():
    status = world.Recv(buf, tether.ANY_SOURCE, TAG)
    src = status.source
    seq, size = expected[src][next_of[src]]
    got = buf[:status.count]
    assert status.count == size, f"from {src}: message {seq} has {status.count} bytes, expected {size}"
    assert int(got[:8].view(np.int64)[0]) == seq, f"from {src}: message {int(got[:8].view(np.int64)[0])} came where {seq} was due"
    assert np.array_equal(got, message(src, seq, size)), f"from {src}: message {seq} is damaged"
    next_of[src] += 1


rng = random.Random(me)
sends = []
for seq, (dest, size) in enumerate(schedule(me)):
    sends.append(world.Isend(message(me, seq, size), dest, tag=TAG))
    while left and world.Iprobe(tether.ANY_SOURCE, TAG) is not None:
        receive_one()
        left -= 1
    if rng.random() < 0.1:
        time.sleep(0.002)  # an idle gap, in which links may retire
while left:
    receive_one()
    left -= 1
for req in sends:
    req.wait()
assert all(next_of[src] == len(expected[src]) for src in expected), (next_of, expected)
world.Barrier()

# A kernel: a ring shift. Its two peers are pinned; after it, the
# others go as the cap says (and nobody retires a pinned link: the
# pinned side refuses).
left_peer, right_peer = (me - 1) % n, (me + 1) % n
out = np.full(1000, me, dtype=np.int32)
into = np.zeros(1000, dtype=np.int32)
with tether.kernel():
    for _ in range(20):
        req = world.Irecv(into, left_peer, tag=2)
        world.Send(out, right_peer, tag=2)
        req.wait()
        assert (into == left_peer).all()
world.Barrier()
capped = tether.hint_get("MAX_LINKS") != "0"


def linked():
    """The counters, and the peers this process holds something for."""
    stats = tether.stats()
    return stats, {int(k.split(".")[1]) for k in stats if k.startswith("peer.") and k.endswith(".link_user_bytes")}


# `tether run`'s own connections (the rendezvous server, the output
# relay) are not links: left out by the port they go to.
LAUNCHER_PORTS = {int(m.group(1)) for key in ("TETHER_RENDEZVOUS", "TETHER_OUTPUT_RELAY")
                  if (m := re.search(r":(\d+)/?$", os.environ.get(key, "")))}


def tcp_connections():
    """This process's established TCP connections to its peers, as the
    kernel lists them."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                count += fields[3] == "01" and fields[9] in inodes and remote_port not in LAUNCHER_PORTS
    return count


def settled(stats):
    """At most the kernel's two links, and (over TCP) as many connections
    as the kernel has for this process: a retire really closes its socket."""
    return stats["links"] <= 2 and ("tcp.links" not in stats or tcp_connections() == stats["tcp.links"])


# The cap is held as progress is made: the links beyond it go, while the
# kernel's two (pinned here, and at each neighbour) stay.
deadline = time.monotonic() + 10
stats, peers = linked()
while capped and not settled(stats) and time.monotonic() < deadline:
    world.Iprobe(tether.ANY_SOURCE, 99)
    time.sleep(0.001)
    stats, peers = linked()
assert {left_peer, right_peer} <= peers, f"the kernel's links went: {stats}"
if capped:
    assert stats["links"] == 2, f"links over the cap stayed after the kernel: {stats}"
    if "tcp.links" in stats:
        assert tcp_connections() == 2, f"{tcp_connections()} TCP connections for tcp.links=2: {stats}"
world.Barrier()
print(f"ok retire {me} {stats['link_retires']} {stats['links']} "
      f"mailbox {stats['mailbox_records_sent']} {stats['mailbox_records_received']}", flush=True)
tether.finalize()
