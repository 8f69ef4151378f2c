"""A peer that dies before it ever contacts this process (tests/
test_startup.py): `crash` joins and exits at once without finalizing, as
a program that raises before its first message; `wait` receives from it
and must get an error, not wait for ever."""

import os
import sys

import numpy as np

import tether

tether.init()
if sys.argv[1] == "crash":
    os._exit(3)
buf = np.zeros(1)
try:
    tether.UNIVERSE.Recv(buf, int(sys.argv[2]))
    print("received?", flush=True)
except tether.TetherError as e:
    print(f"ok {type(e).__name__}: {e}", flush=True)
tether.finalize()
