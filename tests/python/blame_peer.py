"""tether run names the process that died first (tests/test_startup.py):
`victim` (universe rank 0) and `witness` (rank 1) exchange a message,
then both block in a receive; the test kills the victim with SIGKILL and
the witness fails on the lost peer at once (an uncaught PeerLostError)."""

import os
import sys

import numpy as np

import tether

tether.init()
world = tether.UNIVERSE
buf = np.zeros(1)
if sys.argv[1] == "victim":
    world.Send(buf, 1, tag=1)
    print(f"victim pid {os.getpid()}", flush=True)
    world.Recv(buf, 1, tag=2)
else:
    world.Recv(buf, 0, tag=1)
    world.Recv(buf, 0, tag=2)
