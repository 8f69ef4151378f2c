"""The fields example's analysis: 3 ranks get "temperature" from `sim` in
block-cyclic rows (blocks of 8), compute statistics with numpy, and
combine them over their own program's communicator."""

import sys

import numpy as np

import tether

tether.init()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
comm = tether.Comm.create(programs=["stats"])
dist = tether.Dist((96, 64), grid=(3, 1), kinds=(tether.DIST_BLOCK_CYCLIC, tether.DIST_NONE), blocks=(8, 0))
local = np.empty(dist.local_shape)
with tether.Field("temperature", np.float64, dist, peers="sim", mode="get") as field:
    for step in range(steps):
        field.get(step, local)
        mine = np.array([local.sum(), local.size, local.max(), (local > 50.0).sum()])
        total = np.zeros(4)
        comm.Allreduce(mine[[0, 1, 3]].copy(), total[:3], op=tether.SUM)
        hottest = np.zeros(1)
        comm.Allreduce(mine[2:3].copy(), hottest, op=tether.MAX)
        if comm.rank == 0 and step % 5 == 0:
            print(f"stats: step {step:2d}  mean {total[0] / total[1]:6.2f}  max {hottest[0]:6.2f}  "
                  f"cells above 50: {int(total[2])}", flush=True)
if comm.rank == 0:
    print(f"stats: got {steps} steps", flush=True)
