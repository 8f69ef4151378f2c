"""The "ML model" of the Python coupling example: every step it receives
the field blocks of all `sim` ranks straight into one numpy array (no
copy), runs a small MLP (numpy, fixed weights) on each cell's value and
local gradient, and sends each rank the correction for its block.

Run by examples/python_coupling_demo.sh:
    tether run --name sim -n 2 ./sim 5 : --name ml -n 1 python3 model.py 5
"""

import sys

import numpy as np

import tether

CELLS = 4096
TAG_FIELD, TAG_CORRECTION = 1, 2


class Mlp:
    """2 -> 16 -> 1, tanh; deterministic weights standing in for a trained model."""

    def __init__(self, seed=7):
        rng = np.random.default_rng(seed)
        self.w1 = rng.normal(0, 0.5, (2, 16))
        self.b1 = rng.normal(0, 0.1, 16)
        self.w2 = rng.normal(0, 0.05, (16, 1))

    def __call__(self, x):
        return (np.tanh(x @ self.w1 + self.b1) @ self.w2)[:, 0]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tether.init()
    comm = tether.UNIVERSE
    sim = tether.programs()[tether.program_find("sim")]
    first = sim.universe_rank(0)
    ranks = sim.size
    block = CELLS // ranks
    field = np.empty(CELLS)
    model = Mlp()
    for step in range(steps):
        # One receive per simulation rank, each into its slice of `field`.
        recvs = [comm.Irecv(field[r * block:(r + 1) * block], first + r, TAG_FIELD) for r in range(ranks)]
        tether.Request.waitall(recvs)
        anomaly = field - field.mean()
        gradient = np.gradient(field)
        correction = -0.01 * anomaly + 0.1 * model(np.stack([anomaly / 10, gradient], axis=1))
        sends = [comm.Isend(correction[r * block:(r + 1) * block], first + r, TAG_CORRECTION) for r in range(ranks)]
        tether.Request.waitall(sends)
        print(f"step {step}: field mean {field.mean():.3f}, min {field.min():.3f}, max {field.max():.3f}", flush=True)


if __name__ == "__main__":
    main()
