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


def test_collective_benchmark_runs_on_two_programs(built, tmp_path):
    from conftest import INCLUDE, LIB, tether_run

    exe = tmp_path / "coll_bench"
    subprocess.run(["cc", "-O2", "-I", str(INCLUDE), str(ROOT / "benches" / "coll" / "coll_bench.c"),
                    "-o", str(exe), "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
    args = [str(exe), "--iters", "3", "--sizes", "8,65536,600000"]
    proc = tether_run(["--name", "a", "-n", "2", *args, ":", "--name", "b", "-n", "1", *args])
    lines = [l.split("] ", 1)[1].split() for l in proc.stdout.splitlines() if "] " in l]
    ops = {(op, int(size)) for op, size, us in lines if float(us) > 0}
    assert ("barrier", 0) in ops and ("allreduce", 600000) in ops and ("bcast", 65536) in ops, proc.stdout
