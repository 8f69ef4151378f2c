"""The Python side of tests/c/py_peer.c (program `pymodel`, rank i talks
to rank i of program `csim`). Prints "ok c-python"."""

import numpy as np

import tether

tether.init()
comm = tether.UNIVERSE
me = tether.program_rank()
peer = me  # csim sorts before pymodel: its ranks come first in the universe

field = np.empty(1000)
st = comm.Recv(field, peer, tag=1)
assert st.source == peer and st.Get_count(tether.DOUBLE) == 1000, st
assert np.array_equal(field, me * 1000 + np.arange(1000.0))
comm.Send(field + 0.5, peer, tag=1)

comm.Isend(comm.rank * 100 + np.arange(64, dtype=np.int32), peer, tag=2).wait()

try:
    comm.Recv(np.zeros(8, dtype=np.uint8), peer, tag=3)
    raise AssertionError("no TruncateError")
except tether.TruncateError as e:
    assert e.status.count == 16, e.status

comm.Send((np.arange(3 << 18) % 1000).astype(np.float32), peer, tag=4)
print("ok c-python", flush=True)
