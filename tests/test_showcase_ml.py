"""The online-learning showcase (examples/ml, docs/showcase_ml.md), short:
a Fortran/MPI simulation on 2 MPICH ranks and a Python model on 2 ranks
training a tiny scikit-learn network, coupled by two fields, over tcp and
file. Checks, from both programs' records, that every step's state and
tendency agree between the sides (position-weighted checksums), that the
model's prediction error falls while it trains, and that the simulation
advanced with the learned reaction ends closer to the exact one than
without it. Runs examples/ml/showcase.py, as `make demo-ml` does."""

import csv
import importlib.util
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env

pytestmark = [
    pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in ("gfortran", "mpifort", "mpiexec")),
        reason="gfortran, mpifort or mpiexec is missing (Debian: apt-get install gfortran mpich libmpich-dev, "
               "or make deps)",
    ),
    pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                       reason="scikit-learn is missing (make deps installs it; pip install scikit-learn)"),
]

STEPS, TRAIN = 16, 12


def records(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("transport", ["tcp", "file"])
def test_the_model_learns_online_and_both_sides_see_the_same_data(python_package, tmp_path, transport):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ml" / "showcase.py"), "--transports", transport,
         "--nx", "32", "--ny", "24", "--steps", str(STEPS), "--train", str(TRAIN), "--out", str(tmp_path),
         "--timeout", "240", "--", "--hidden", "8,8", "--passes", "8", "--rate", "0.01"],
        capture_output=True, text=True, timeout=300, env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "both sides agreed on every step's data" in proc.stdout, proc.stdout

    sim, ml = records(tmp_path / transport / "sim.csv"), records(tmp_path / transport / "ml.csv")
    assert [int(r["step"]) for r in sim] == [int(r["step"]) for r in ml] == list(range(STEPS))
    for a, b in zip(sim, ml):
        for key in ("state_checksum", "tendency_checksum"):
            assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-12, abs=1e-9), (key, a["step"])
    assert [r["phase"] for r in sim] == ["exact"] * TRAIN + ["model"] * (STEPS - TRAIN)

    errors = [float(r["prediction_error"]) for r in ml[:TRAIN]]
    assert errors[0] == pytest.approx(1.0), "an untrained model predicts the mean, error 1"
    assert errors[-1] < 0.5 * errors[0], errors
    assert float(ml[TRAIN - 1]["training_loss"]) < float(ml[0]["training_loss"])
    last = sim[-1]
    assert 0 < float(last["error_ml"]) < float(last["error_none"]), last
