"""The online-learning showcase's model program (docs/showcase_ml.md): gets
the simulation's field "state" (q, r/r0, reaction tendency R) every step in
its own decomposition (blocks of x over its ranks), predicts R from
(q, r/r0) with a neural network and puts the prediction back as field
"tendency" at once, then trains on this step's exact R while the
simulation computes its next step. The network's weights are averaged over
this program's ranks after every step (a Tether allreduce over its own
communicator), so all ranks hold one model.

    model.py nx ny steps train outdir [--backend sklearn|torch] [--hidden 32,32]
             [--samples N] [--passes K] [--rate LR] [--seed S]

Writes outdir/ml.csv (rank 0): per step the time, time waiting on `sim`,
the checksums of the state received and of the tendency sent (the same
position-weighted sums as sim.f90's), the prediction's error before
training on the step (normalised: 1 is no better than predicting the
mean), and the training loss.
"""

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

import tether

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learners import make_learner  # noqa: E402


def weights(channels, x0, nx_local, ny):
    """sim.f90's checksum weights 1 + (7c + 3i + 5j) mod 11 for global indices."""
    c = np.arange(channels)[:, None, None]
    i = (x0 + np.arange(nx_local))[None, :, None]
    j = np.arange(ny)[None, None, :]
    return 1.0 + (7 * c + 3 * i + 5 * j) % 11


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("nx", "ny", "steps", "train"):
        parser.add_argument(name, type=int)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--backend", default="sklearn")
    parser.add_argument("--hidden", default="32,32", help="hidden layer widths, comma-separated")
    parser.add_argument("--samples", type=int, default=4096, help="cells per rank trained on per step")
    parser.add_argument("--passes", type=int, default=2, help="training passes over them per step")
    parser.add_argument("--rate", type=float, default=3e-3, help="learning rate")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    tether.init()
    comm = tether.Comm.create(programs=["ml"])
    learner = make_learner(args.backend, 2, [int(h) for h in args.hidden.split(",")], args.seed, args.rate)
    rng = np.random.default_rng(args.seed + comm.rank)

    nx, ny = args.nx, args.ny
    state_dist = tether.Dist((3, nx, ny), grid=(1, comm.size, 1),
                             kinds=(tether.DIST_NONE, tether.DIST_BLOCK, tether.DIST_NONE))
    tendency_dist = tether.Dist((nx, ny), grid=(comm.size, 1), kinds=(tether.DIST_BLOCK, tether.DIST_NONE))
    state = np.empty(state_dist.local_shape)
    nx_local = state.shape[1]
    x0 = comm.rank * -(-nx // comm.size)
    w_state = weights(3, x0, nx_local, ny)
    w_tendency = weights(1, x0, nx_local, ny)[0]

    scale = None
    rows = []
    with tether.Field("state", np.float64, state_dist, peers="sim", mode="get") as state_field, \
            tether.Field("tendency", np.float64, tendency_dist, peers="sim", mode="put") as tendency_field:
        for step in range(args.steps):
            t0 = time.perf_counter()
            state_field.get(step, state)
            waited = time.perf_counter() - t0
            x = state[:2].reshape(2, -1).T.copy()
            y = state[2].ravel().copy()
            if scale is None:
                scale = global_scale(comm, x, y)
            mean_x, std_x, mean_y, std_y = scale
            xn = (x - mean_x) / std_x
            predicted = (learner.predict(xn) * std_y + mean_y).reshape(nx_local, ny)
            t1 = time.perf_counter()
            tendency_field.put(step, predicted)
            waited += time.perf_counter() - t1

            sums = np.array([(state * w_state).sum(), (predicted * w_tendency).sum(),
                             ((predicted.ravel() - y) ** 2).sum() / std_y ** 2, y.size, 0.0])
            if step < args.train:
                yn = (y - mean_y) / std_y
                loss = 0.0
                for _ in range(args.passes):
                    pick = rng.choice(len(xn), size=min(args.samples, len(xn)), replace=False)
                    loss = learner.partial_fit(xn[pick], yn[pick])
                average(comm, learner)
                sums[4] = loss
            total = np.zeros_like(sums)
            comm.Allreduce(sums, total, op=tether.SUM)
            rows.append([step, time.perf_counter() - t0, waited, total[0], total[1],
                         total[2] / total[3] if step < args.train else "", total[4] / comm.size if step < args.train else ""])
            if comm.rank == 0 and step < args.train and (step % 10 == 0 or step == args.train - 1):
                print(f"ml: step {step:3d}  prediction error {total[2] / total[3]:.3e}  training loss {total[4] / comm.size:.3e}",
                      flush=True)

    if comm.rank == 0:
        args.outdir.mkdir(parents=True, exist_ok=True)
        with open(args.outdir / "ml.csv", "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["step", "seconds", "wait_seconds", "state_checksum", "tendency_checksum",
                          "prediction_error", "training_loss"])
            out.writerows(rows)
        print(f"ml: {args.steps} steps on {comm.size} ranks with {args.backend}, "
              f"{1000 * sum(r[1] for r in rows) / len(rows):.3f} ms per step", flush=True)


def global_scale(comm, x, y):
    """Means and standard deviations of the inputs and the target over all
    ranks, fixed from the first step on (every rank scales alike)."""
    local = np.concatenate([x.sum(0), (x * x).sum(0), [y.sum(), (y * y).sum(), len(y)]])
    total = np.zeros_like(local)
    comm.Allreduce(local, total, op=tether.SUM)
    n = total[-1]
    mean_x, mean_y = total[0:2] / n, total[4] / n
    std_x = np.sqrt(np.maximum(total[2:4] / n - mean_x ** 2, 1e-30))
    std_y = float(np.sqrt(max(total[5] / n - mean_y ** 2, 1e-30)))
    return mean_x, std_x, mean_y, std_y


def average(comm, learner) -> None:
    """Replace every rank's weights by their mean over the program's ranks."""
    arrays = learner.parameters()
    if comm.size == 1 or not arrays:
        return
    flat = np.concatenate([a.ravel() for a in arrays])
    mean = np.empty_like(flat)
    comm.Allreduce(flat, mean, op=tether.SUM)
    mean /= comm.size
    out, at = [], 0
    for a in arrays:
        out.append(mean[at:at + a.size].reshape(a.shape))
        at += a.size
    learner.set_parameters(out)


if __name__ == "__main__":
    main()
