"""Joins, says so, and makes progress (accepting connections, timing out
handshakes) until the file named by argv[1] exists, then finalizes
(tests/test_warnings.py)."""

import os
import sys
import time

import tether

tether.init()
print("joined", flush=True)
while not os.path.exists(sys.argv[1]):
    tether.progress()
    time.sleep(0.01)
tether.finalize()
print("finalized", flush=True)
