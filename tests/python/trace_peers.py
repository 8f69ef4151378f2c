"""The trace test's Python program: the scenario of tests/c/trace_peers.c
(every process exchanges 8 doubles with every process of the other
programs, `rounds` times; program `late` sleeps before sending; then an
allreduce over the universe).  usage: trace_peers.py ROUNDS LATE DELAY_MS"""

import sys
import time

import numpy as np

import tether

tether.init()
rounds, late, delay_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
world = tether.UNIVERSE
me, n = world.rank, world.size
name = tether.program_name(tether.program_id())
first = me - tether.program_rank()
size = tether.program_size(tether.program_id())
others = [q for q in range(n) if not first <= q < first + size]
inbox = {q: np.zeros(8) for q in others}
for r in range(rounds):
    requests = [world.Irecv(inbox[q], q, tag=r * 1000 + q) for q in others]
    if name == late:
        time.sleep(delay_ms / 1000)
    out = np.arange(8, dtype=np.float64) + me * 100 + r
    requests += [world.Isend(out, q, tag=r * 1000 + me) for q in others]
    tether.Request.waitall(requests)
    for q in others:
        assert inbox[q][7] == q * 100 + r + 7, (r, q, inbox[q])
total = np.zeros(1)
world.Allreduce(np.ones(1), total, op=tether.SUM)
assert total[0] == n
print(f"ok trace {name}:{tether.program_rank()}", flush=True)
tether.finalize()
