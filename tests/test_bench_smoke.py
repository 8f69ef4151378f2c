"""The benchmark harness runs end to end at tiny sizes (no speed is
asserted: tests never judge wall-clock time)."""

import subprocess
import sys

from conftest import ROOT


def test_compare_p2p_quick_run_completes(built):
    proc = subprocess.run(
        [sys.executable, "benches/compare_p2p.py", "--quick", "--no-quiet-gate", "--no-make"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| 8 B |" in proc.stdout and "| 16 MiB |" in proc.stdout, proc.stdout


def test_compare_shm_quick_run_completes(built):
    proc = subprocess.run([sys.executable, "benches/compare_shm.py", "--quick"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| Tether shm |" in proc.stdout and "| raw flag ping-pong |" in proc.stdout, proc.stdout
