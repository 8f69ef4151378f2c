"""The online-learning showcase (docs/showcase_ml.md): builds sim.f90 with
the system's mpifort, runs the Fortran/MPI simulation (`sim`) and the
Python model (`ml`) coupled by two fields over each transport, checks that
both sides saw the same data every step, and prints the table of time per
step and share spent waiting on the other side, the model's error falling
as it trains, and the simulation's error with and without the learned term.

    python3 examples/ml/showcase.py [--transports tcp,shm,file,hybrid] [--nx 128 --ny 128]
        [--steps 150 --train 100] [--sim-ranks 2 --ml-ranks 2] [--backend sklearn]
        [--plot docs/showcase_ml.png] [--out build/examples/ml] [model.py options after --]

Needs `make build python`, gfortran and an MPI (make deps installs them),
and the backend's library (make deps installs scikit-learn).
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# What each transport row sets. hybrid: payloads above 64 KiB (every
# step's fields here) go through files, control and small messages over
# shared memory or sockets.
TRANSPORTS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    "file": {"TETHER_TRANSPORTS": "file"},
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "65536"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transports", default="tcp,shm,file,hybrid")
    parser.add_argument("--nx", type=int, default=128)
    parser.add_argument("--ny", type=int, default=128)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--train", type=int, default=100, help="steps with the exact reaction, training the model")
    parser.add_argument("--sim-ranks", type=int, default=2)
    parser.add_argument("--ml-ranks", type=int, default=2)
    parser.add_argument("--backend", default="sklearn")
    parser.add_argument("--plot", type=Path, help="draw the loss and error curves into this PNG (matplotlib)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "examples" / "ml")
    parser.add_argument("--timeout", type=int, default=600, help="seconds each coupled run may take")
    parser.add_argument("model_args", nargs="*", help="more model.py options (after --)")
    args = parser.parse_args()
    transports = args.transports.split(",")
    unknown = [t for t in transports if t not in TRANSPORTS]
    if unknown:
        parser.error(f"unknown transport {', '.join(unknown)}; choose from {', '.join(TRANSPORTS)}")
    if not 0 < args.train <= args.steps:
        parser.error(f"--train {args.train} must be between 1 and --steps {args.steps}")

    sim = build(args.out)
    results = {}
    for transport in transports:
        outdir = args.out / transport
        outdir.mkdir(parents=True, exist_ok=True)
        for old in ("sim.csv", "ml.csv"):
            (outdir / old).unlink(missing_ok=True)
        print(f"== {transport}: sim (Fortran, {args.sim_ranks} MPI ranks) <-> ml (Python, {args.ml_ranks} ranks, "
              f"{args.backend}) ==", flush=True)
        run(args, sim, transport, outdir)
        results[transport] = check(outdir, args.train)

    print_table(args, results)
    if args.plot:
        plot(results[transports[0]], args, transports[0])
    return 0


def build(out: Path) -> Path:
    for tool in ("mpifort", "mpiexec"):
        if shutil.which(tool) is None:
            sys.exit(f"showcase: {tool} not found (Debian: apt-get install mpich libmpich-dev gfortran, or make deps)")
    if not (ROOT / "build" / "include" / "tether.mod").exists():
        sys.exit("showcase: build/include/tether.mod is missing: run make build (with gfortran installed)")
    out.mkdir(parents=True, exist_ok=True)
    exe = out / "sim"
    subprocess.run(["mpifort", "-O2", "-std=f2018", "-Wall", "-I", str(ROOT / "build" / "include"),
                    str(HERE / "sim.f90"), "-J", str(out), "-o", str(exe), "-L", str(ROOT / "build" / "lib"),
                    "-ltether_fortran", "-ltether", f"-Wl,-rpath,{ROOT / 'build' / 'lib'}"], check=True)
    return exe


def mpiexec() -> list:
    """MPICH's mpiexec pinned to loopback where it accepts -iface lo."""
    probe = subprocess.run(["mpiexec", "-iface", "lo", "-n", "1", "true"], capture_output=True, timeout=60)
    return ["mpiexec", "-iface", "lo"] if probe.returncode == 0 else ["mpiexec"]


def run(args, sim: Path, transport: str, outdir: Path) -> None:
    env = dict(os.environ, UCX_NET_DEVICES=os.environ.get("UCX_NET_DEVICES", "lo"), **TRANSPORTS[transport])
    if transport in ("file", "hybrid"):
        env["TETHER_FILE_DIR"] = str(outdir / "files")
    sizes = [str(args.nx), str(args.ny), str(args.steps), str(args.train), str(outdir)]
    command = [str(ROOT / "build" / "bin" / "tether"), "run", "--timeout", str(args.timeout),
               "--name", "sim", *mpiexec(), "-n", str(args.sim_ranks), str(sim), *sizes, ":",
               "--name", "ml", "-n", str(args.ml_ranks), sys.executable, str(HERE / "model.py"), *sizes,
               "--backend", args.backend, *args.model_args]
    proc = subprocess.run(command, env=env)
    if proc.returncode != 0:
        sys.exit(f"showcase: the {transport} run failed (exit {proc.returncode}): {' '.join(command)}")


def rows(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check(outdir: Path, train: int) -> dict:
    """Both programs' records, after checking that every step's state and
    tendency checksums agree between the two sides."""
    sim, ml = rows(outdir / "sim.csv"), rows(outdir / "ml.csv")
    if len(sim) != len(ml):
        sys.exit(f"showcase: {outdir}: sim recorded {len(sim)} steps, ml {len(ml)}")
    for a, b in zip(sim, ml):
        for key in ("state_checksum", "tendency_checksum"):
            x, y = float(a[key]), float(b[key])
            if abs(x - y) > 1e-9 * max(abs(x), abs(y), 1.0):
                sys.exit(f"showcase: {outdir}: step {a['step']}: {key} is {x!r} at sim, {y!r} at ml")
    return {"sim": sim, "ml": ml}


def mean(records: list, key: str) -> float:
    values = [float(r[key]) for r in records[1:]]  # step 0 includes connecting
    return sum(values) / len(values)


def print_table(args, results: dict) -> None:
    print(f"\n{args.nx} x {args.ny} cells, {args.steps} steps ({args.train} training on the exact reaction, "
          f"{args.steps - args.train} using the learned one), fields of {3 * args.nx * args.ny * 8 // 1024} KiB "
          f"and {args.nx * args.ny * 8 // 1024} KiB per step; both sides agreed on every step's data")
    print(f"{'transport':>9} | {'sim ms/step':>11} {'waiting':>8} | {'ml ms/step':>10} {'waiting':>8} | "
          f"{'model error':>11} | {'error, learned':>14} {'no reaction':>11}")
    for transport, r in results.items():
        sim, ml = r["sim"], r["ml"]
        sim_ms, ml_ms = mean(sim, "seconds"), mean(ml, "seconds")
        last_train = ml[args.train - 1]
        print(f"{transport:>9} | {1000 * sim_ms:11.2f} {100 * mean(sim, 'wait_seconds') / sim_ms:7.0f}% | "
              f"{1000 * ml_ms:10.2f} {100 * mean(ml, 'wait_seconds') / ml_ms:7.0f}% | "
              f"{float(last_train['prediction_error']):11.2e} | "
              f"{float(sim[-1]['error_ml']):14.2e} {float(sim[-1]['error_none']):11.2e}")
    print("model error: the prediction's mean squared error at the last training step, before training on it, "
          "relative to the variance of the exact tendency (1: no better than its mean)")
    print("error: relative L2 distance of the simulation's state from the exact reference at the last step, "
          "advancing with the learned reaction / without the reaction")


def plot(result: dict, args, transport: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print("showcase: matplotlib is missing, so no plot (make deps installs it)", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ml, sim = result["ml"][:args.train], result["sim"][args.train:]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.semilogy([int(r["step"]) for r in ml], [float(r["prediction_error"]) for r in ml], label="prediction error (before training on the step)")
    left.semilogy([int(r["step"]) for r in ml], [2 * float(r["training_loss"]) for r in ml], label="training loss (MSE)")
    left.set_xlabel("simulation step")
    left.set_ylabel("normalised mean squared error")
    left.set_title(f"ml ({args.backend}) learning online")
    left.legend(fontsize=8)
    steps = [int(r["step"]) for r in sim]
    right.semilogy(steps, [float(r["error_ml"]) for r in sim], label="with the learned reaction")
    right.semilogy(steps, [float(r["error_none"]) for r in sim], label="without the reaction")
    right.set_xlabel("simulation step")
    right.set_ylabel("relative L2 error vs exact")
    right.set_title("sim after switching to the model")
    right.legend(fontsize=8)
    fig.suptitle(f"Fortran/MPI sim ({args.sim_ranks} ranks) + Python ml ({args.ml_ranks} ranks) over {transport}, "
                 f"{args.nx}x{args.ny}")
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    print(f"showcase: plot written to {args.plot}")


if __name__ == "__main__":
    sys.exit(main())
