"""Many writers, one mailbox: every process but rank 0 sends rank 0
small messages (under TETHER_MAX_LINKS they go through rank 0's
shared-memory mailbox, which they take in turn and fill faster than it
is read); rank 0 checks that each arrives once, intact and in its
sender's order.

Arguments: messages each sender sends. Prints `ok fan-in <rank>
<mailbox records sent> <mailbox records received>`."""

import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
me, n = world.rank, world.size
count = int(sys.argv[1])


def message(src, seq):
    size = 8 + (src * 131 + seq * 37) % 1000
    body = ((np.arange(size, dtype=np.uint32) * 5 + src * 11 + seq) % 253).astype(np.uint8)
    body[:4] = np.frombuffer(np.int32(seq).tobytes(), dtype=np.uint8)
    return body


if me == 0:
    next_of = [0] * n
    buf = np.zeros(1008, dtype=np.uint8)
    for _ in range(count * (n - 1)):
        status = world.Recv(buf, tether.ANY_SOURCE, 5)
        src = status.source
        want = message(src, next_of[src])
        got = buf[:status.count]
        assert status.count == len(want), f"from {src}: {status.count} bytes, expected {len(want)}"
        assert int(got[:4].view(np.int32)[0]) == next_of[src], f"from {src}: out of order"
        assert np.array_equal(got, want), f"from {src}: message {next_of[src]} damaged"
        next_of[src] += 1
    assert next_of[1:] == [count] * (n - 1), next_of
else:
    for seq in range(count):
        world.Send(message(me, seq), 0, tag=5)
world.Barrier()
stats = tether.stats()
print(f"ok fan-in {me} {stats['mailbox_records_sent']} {stats['mailbox_records_received']}", flush=True)
tether.finalize()
