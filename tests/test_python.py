"""The Python package through `tether run`: Python-Python scenarios of
tests/python/p2p_suite.py, Python with C, process failure, and the type
stubs against the module."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env, tether_run

SUITE = ROOT / "tests" / "python" / "p2p_suite.py"
SCENARIOS = ["pairs", "objects", "wildcards", "truncation", "random_order", "dropped_buffers", "rejected", "identity"]


def universe(*cmd, alpha=2, beta=2):
    return ["--name", "alpha", "-n", str(alpha), *cmd, ":", "--name", "beta", "-n", str(beta), *cmd]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_python_scenario(python_package, scenario):
    proc = tether_run(universe(sys.executable, str(SUITE), scenario))
    assert proc.stdout.count(f"ok {scenario}") == 4


def test_uncaught_exception_ends_the_run(python_package):
    proc = tether_run(universe(sys.executable, str(SUITE), "fail"), timeout=60, check=False)
    assert proc.returncode != 0
    assert "deliberate failure in rank 1" in proc.stdout + proc.stderr
    assert "ok fail" not in proc.stdout


def test_runner_aborts_on_exception_without_init_hooks(python_package, tmp_path):
    script = tmp_path / "raiser.py"
    script.write_text(
        "import sys, numpy as np, tether\n"
        "tether.init(abort_on_exception=False)\n"
        "if tether.UNIVERSE.rank == 0:\n"
        "    raise ValueError('runner must abort')\n"
        "tether.UNIVERSE.Recv(np.zeros(1), 0)\n"
    )
    cmd = [sys.executable, "-m", "tether", str(script)]
    proc = tether_run(universe(*cmd, alpha=1, beta=1), timeout=60, check=False)
    assert proc.returncode != 0
    assert "runner must abort" in proc.stdout + proc.stderr


def test_python_and_c_exchange(python_package, program):
    peer = program("py_peer")
    script = ROOT / "tests" / "python" / "c_peer.py"
    proc = tether_run(["--name", "csim", "-n", "2", peer, ":", "--name", "pymodel", "-n", "2", sys.executable, str(script)])
    assert proc.stdout.count("ok c-python") == 4


def test_stubs_match_the_module(python_package):
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "tether"], capture_output=True, text=True, env=clean_env()
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


COLL_SUITE = ROOT / "tests" / "python" / "coll_suite.py"


@pytest.mark.parametrize("scenario", ["buffers", "nonblocking", "objects", "communicators", "errors"])
def test_python_collectives(python_package, scenario):
    proc = tether_run(universe(sys.executable, str(COLL_SUITE), scenario, alpha=2, beta=3), timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5


def test_python_coupling_example(python_package):
    proc = subprocess.run(
        ["bash", str(ROOT / "examples" / "python_coupling_demo.sh"), "3"],
        capture_output=True, text=True, timeout=120, env=clean_env(PYTHON=sys.executable),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ml:0] step 2: field mean" in proc.stdout
    assert "[sim:0] step 2: sent 2048 cells, correction norm" in proc.stdout


def test_python_benchmark_quick_run_completes(python_package):
    proc = subprocess.run(
        [sys.executable, "benches/python/compare.py", "--quick", "--no-mpi"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| 8 B |" in proc.stdout and "| 16 MiB |" in proc.stdout, proc.stdout


FIELD_SUITE = ROOT / "tests" / "python" / "field_suite.py"
FIELD_ARGS = ["shape=12x10", "elem=8", "steps=8", "prod=R:2x1:B,N:C", "cons=R:1x3:N,BC2:F"]


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "nonblocking"])
def test_python_fields_between_c_and_fortran_ordered_arrays(python_package, nonblocking):
    # A Python producer with C-ordered arrays, a Python consumer with
    # Fortran-ordered ones, every element of every step checked.
    args = [*FIELD_ARGS, *(["nonblocking=1"] if nonblocking else [])]
    cmd = [sys.executable, str(FIELD_SUITE), *args]
    proc = tether_run(["--name", "prod", "-n", "2", *cmd, ":", "--name", "cons", "-n", "3", *cmd])
    assert proc.stdout.count("ok field 8") == 5, proc.stdout


def test_python_consumer_of_a_c_producer(python_package, program):
    producer = program("field_suite")
    cmd = [sys.executable, str(FIELD_SUITE), *FIELD_ARGS]
    proc = tether_run(["--name", "prod", "-n", "2", producer, *FIELD_ARGS, ":", "--name", "cons", "-n", "3", *cmd])
    assert proc.stdout.count("ok field 8") == 5, proc.stdout


def test_python_field_arguments_are_checked(python_package, tmp_path):
    script = tmp_path / "checks.py"
    script.write_text(
        "import numpy as np, tether\n"
        "tether.init()\n"
        "me = tether.programs()[tether._native.program_id()].name\n"
        "if me == 'a':\n"
        "    dist = tether.Dist((6, 4), (1, 1), (tether.DIST_BLOCK, tether.DIST_NONE), order='F')\n"
        "else:\n"
        "    dist = tether.Dist.boxes((6, 4), starts=[(0, 0)], counts=[(6, 4)], order='F')\n"
        "assert dist.local_shape == (6, 4), dist.local_shape\n"
        "with tether.Field('t', np.float64, dist, peers='b' if me == 'a' else 'a',\n"
        "                  mode='put' if me == 'a' else 'get') as f:\n"
        "    for bad, kind in [(np.zeros((6, 4), np.float32), TypeError), (np.zeros((6, 3)), ValueError),\n"
        "                      (np.zeros((6, 4), order='C'), ValueError)]:\n"
        "        try:\n"
        "            (f.put if f.mode == 'put' else f.get)(0, bad)\n"
        "        except kind as e:\n"
        "            print('refused:', e)\n"
        "        else:\n"
        "            raise SystemExit(f'{bad.dtype} {bad.shape} accepted')\n"
        "    a = np.asfortranarray(np.arange(24.0).reshape(6, 4))\n"
        "    if f.mode == 'put':\n"
        "        f.put(0, a)\n"
        "    else:\n"
        "        b = np.zeros((6, 4), order='F')\n"
        "        f.get(0, b)\n"
        "        assert (a == b).all()\n"
        "print('ok checks')\n"
    )
    cmd = [sys.executable, str(script)]
    proc = tether_run(["--name", "a", "-n", "1", *cmd, ":", "--name", "b", "-n", "1", *cmd])
    assert proc.stdout.count("ok checks") == 2, proc.stdout
    assert "must be contiguous in F order" in proc.stdout


@pytest.mark.skipif(shutil.which("gfortran") is None, reason="gfortran is missing (make deps)")
def test_fields_example(python_package):
    # examples/fields: a Fortran simulation on 4 ranks, a Python analysis
    # on 3 and a C picture writer on 2 (boxes, one of them a zoom).
    proc = subprocess.run(
        ["bash", str(ROOT / "examples" / "fields_demo.sh"), "12"],
        capture_output=True, text=True, timeout=180, env=clean_env(PYTHON=sys.executable),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stats: got 12 steps" in proc.stdout
    assert "viz: rank 0 wrote 3 pictures of 96x64" in proc.stdout
    assert "viz: rank 1 wrote 3 pictures of 32x32" in proc.stdout
    picture = ROOT / "build" / "examples" / "fields" / "viz-0-10.pgm"
    assert picture.read_bytes().startswith(b"P5\n64 96\n255\n")


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_counters_count_what_moved_and_print_at_finalize(python_package, transport):
    script = str(ROOT / "tests" / "python" / "stats_check.py")
    proc = tether_run(["--name", "alpha", "-n", "1", sys.executable, script, transport, ":",
                       "--name", "beta", "-n", "1", sys.executable, script, transport],
                      env=clean_env(TETHER_TRANSPORTS=transport, TETHER_STATS="1"))
    assert proc.stdout.count("ok stats") == 2, proc.stdout + proc.stderr
    text = proc.stdout + proc.stderr
    assert f"tether stats alpha:0: peer.1.{transport}.bytes_sent {3 * 100 + (1 << 20)}" in text, text
    assert "tether stats beta:0: blocked_ns" in text, text


HELLO = "import tether; tether.init(); print('hello', tether.universe_rank(), 'of', tether.universe_size())"


def python_m_tether_run(args, **env):
    """`python -m tether run ARGS` with `env` on top of a clean environment."""
    return subprocess.run([sys.executable, "-m", "tether", "run", "--timeout", "60", *args],
                          capture_output=True, text=True, timeout=90, env=clean_env(**env))


def test_python_m_tether_run_finds_the_launcher(python_package, tmp_path):
    """After `pip install`, `python -m tether run` starts a run: through
    TETHER_LAUNCHER, else `tether` on PATH; a wrong TETHER_LAUNCHER or no
    launcher anywhere is a clear error naming where it looked."""
    from conftest import TETHER

    args = ["--name", "a", "-n", "2", sys.executable, "-c", HELLO, ":", "--name", "b", "-n", "1", sys.executable,
            "-c", HELLO]
    want = ["[a:0] hello 0 of 3", "[a:1] hello 1 of 3", "[b:0] hello 2 of 3"]
    by_variable = python_m_tether_run(args, TETHER_LAUNCHER=TETHER)
    assert by_variable.returncode == 0, by_variable.stderr
    assert sorted(by_variable.stdout.splitlines()) == want
    assert "unknown setting" not in by_variable.stderr

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tether").symlink_to(TETHER)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    by_path = python_m_tether_run(args, PATH=path)
    assert by_path.returncode == 0, by_path.stderr
    assert sorted(by_path.stdout.splitlines()) == want

    wrong = python_m_tether_run(args, TETHER_LAUNCHER=str(tmp_path / "nothing"))
    assert wrong.returncode == 127
    assert f"TETHER_LAUNCHER={tmp_path / 'nothing'} (not an executable file)" in wrong.stderr

    # No launcher anywhere: PATH without one and no checkout to fall back on.
    code = ("import sys, tether._launcher as l; l._checkouts = lambda: []; "
            "l.run(sys.argv[1:])")
    nowhere = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                             env=clean_env(PATH=str(tmp_path)))
    assert nowhere.returncode == 127
    assert "cannot find Tether's launcher" in nowhere.stderr
    assert "TETHER_LAUNCHER (not set)" in nowhere.stderr and f"PATH (no executable `tether` in '{tmp_path}')" in nowhere.stderr


def test_launcher_falls_back_on_the_checkout(python_package):
    """Without TETHER_LAUNCHER and `tether` on PATH, the checkout's
    build/bin/tether is found (the package records where it was built)."""
    code = ("import tether._launcher as l; from pathlib import Path; "
            f"l._checkouts = lambda: [Path({str(ROOT)!r})]; print(l.find()[0])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_env(PATH="/nonexistent"), check=True)
    assert proc.stdout.strip() == str(ROOT / "build" / "bin" / "tether")
    code = "import tether._launcher as l; print(l._checkouts())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "PosixPath(" in proc.stdout, proc.stdout


@pytest.mark.parametrize("setup, sender_put, receiver_got", [
    ("shm", 1 << 19, 1 << 19),
    ("shm-no-split", 1 << 20, 0),
    ("shm-no-cma", 0, 0),
    ("tcp", 0, 0),
])
def test_large_messages_move_by_remote_memory_where_the_transport_reaches_it(python_package, setup,
                                                                          sender_put, receiver_got):
    """On one host the engine's rendezvous writes the message into the
    receive buffer (and, from TETHER_SHM_SPLIT_BYTES on, the receiver reads
    the second half itself), which the counters show; without cross-memory
    attach, or over TCP, the data goes through the link."""
    env = {"shm": {"TETHER_TRANSPORTS": "shm"},
           "shm-no-split": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_SPLIT_BYTES": "0"},
           "shm-no-cma": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_CMA": "0"},
           "tcp": {"TETHER_TRANSPORTS": "tcp"}}[setup]
    transport = env["TETHER_TRANSPORTS"]
    script = str(ROOT / "tests" / "python" / "remote_memory_check.py")
    proc = tether_run(["--name", "a", "-n", "2", sys.executable, script, transport],
                      env=clean_env(**env))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"remote 0 put {sender_put} got 0" in proc.stdout, proc.stdout
    assert f"remote 1 put 0 got {receiver_got}" in proc.stdout, proc.stdout


def test_init_after_finalize_is_an_init_error(python_package):
    """A process joins once, as with MPI (issue 24): the second init raises."""
    code = ("import tether\ntether.init()\ntether.finalize()\n"
            "try:\n    tether.init()\n    print('joined twice')\n"
            "except tether.InitError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(TETHER_PROGRAM="solo"), capture_output=True,
                         text=True, timeout=60).stdout
    assert out.startswith("refused: TETHER_ERR_INIT: tether_init after tether_finalize"), out
