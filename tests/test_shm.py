"""The shared-memory transport: message sizes across every protocol
boundary (also with cross-memory attach switched off, which forces the
copy-through-the-ring fallback), a peer killed with SIGKILL in the middle
of a transfer, and no trace left in /dev/shm whatever happens."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, tether_run

SETUPS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    "shm-no-cma": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_CMA": "0"},
    "shm-fenced": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_MEMBARRIER": "0"},
    "shm-small-ring": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_RING_BYTES": "4096"},
    "shm-no-split": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_SPLIT_BYTES": "0"},
    "shm-split-all": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_SPLIT_BYTES": "1", "TETHER_EAGER_LIMIT": "4096"},
}


def dev_shm():
    return set(os.listdir("/dev/shm")) if Path("/dev/shm").is_dir() else set()


@pytest.mark.parametrize("setup", SETUPS)
def test_sizes_across_protocol_boundaries(built, program, setup):
    before = dev_shm()
    prog = program("sizes")
    proc = tether_run(["--name", "a", "-n", "2", prog], env=clean_env(**SETUPS[setup]), timeout=120)
    assert proc.stdout.count("ok sizes") == 2
    assert "size 67108864 ok" in proc.stdout and "size 0 ok" in proc.stdout
    assert dev_shm() <= before


@pytest.mark.parametrize("side", ["a", "b"])
def test_split_copy_when_one_side_declines(built, program, side):
    """A process that never splits (TETHER_SHM_SPLIT_BYTES=0) beside one
    that does: offers are not taken, or not made, and every size still
    arrives whole, both ways."""
    prog = program("sizes")
    off = ["env", "TETHER_SHM_SPLIT_BYTES=0", prog]
    a, b = (off, [prog]) if side == "a" else ([prog], off)
    proc = tether_run(["--name", "a", "-n", "1", *a, ":", "--name", "b", "-n", "1", *b],
                      env=clean_env(TETHER_TRANSPORTS="shm"), timeout=120)
    assert proc.stdout.count("ok sizes") == 2
    assert "size 67108864 ok" in proc.stdout


def sizes_with_a_call_refused_to_rank_1(program, call):
    """The size matrix between two processes, rank 1 with a seccomp filter
    that refuses one system call (tests/c/sizes.c: SIZES_DENY_<call>=1),
    logging at info."""
    prog = program("sizes")
    return tether_run(["--name", "a", "-n", "1", prog, ":", "--name", "b", "-n", "1",
                       "env", f"SIZES_DENY_{call}=1", prog],
                      env=clean_env(TETHER_TRANSPORTS="shm", TETHER_LOG_LEVEL="info"), timeout=120)


def test_split_copy_when_the_kernel_refuses_the_read(built, program):
    """Rank 1 may write to rank 0 by cross-memory attach but not read from
    it (a seccomp filter on process_vm_readv): its first split read is
    refused, it says so, the sender writes that part too, and from then on
    it does not take offers. Every size arrives whole."""
    proc = sizes_with_a_call_refused_to_rank_1(program, "READV")
    assert proc.stdout.count("ok sizes") == 2
    assert "size 67108864 ok" in proc.stdout
    assert proc.stderr.count("by cross-memory attach refused") == 1, proc.stderr


def test_a_process_refused_membarrier_writes_and_is_written_to_with_fences(built, program):
    """Rank 1 cannot call membarrier (a seccomp filter): it says so once
    (and so does not register, nor say in its segment that it sleeps with
    the barrier: both ends then fence, which the test cannot see), and
    every size arrives whole, both ways."""
    proc = sizes_with_a_call_refused_to_rank_1(program, "MEMBARRIER")
    assert proc.stdout.count("ok sizes") == 2
    assert "size 67108864 ok" in proc.stdout
    assert proc.stderr.count("membarrier refused") == 1, proc.stderr
    assert "[b:0]" in proc.stderr.split("membarrier refused")[0].splitlines()[-1], proc.stderr


def launch(prog, scenario, rdv, rank, size, **extra):
    env = clean_env(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM="solo", TETHER_RANK=rank, TETHER_SIZE=size,
                    TETHER_TRANSPORTS="shm", **extra)
    return subprocess.Popen([prog, scenario], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_line(proc, text, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {text!r}: {proc.stderr.read() if proc.poll() is not None else 'still running'}")


@pytest.mark.parametrize("cma", ["1", "0"])
def test_kill_9_mid_transfer_fails_pending_requests_and_leaves_nothing(built, program, tmp_path, cma):
    before = dev_shm()
    prog = program("p2p_suite")
    survivor = launch(prog, "victim", tmp_path, 0, 2, TETHER_SHM_CMA=cma)
    victim = launch(prog, "victim", tmp_path, 1, 2, TETHER_SHM_CMA=cma)
    try:
        wait_line(victim, "victim ready")
        wait_line(survivor, "survivor waiting")
        victim.send_signal(signal.SIGKILL)
        out, err = survivor.communicate(timeout=10)
    finally:
        for p in (survivor, victim):
            if p.poll() is None:
                p.kill()
            p.wait()
    assert survivor.returncode == 0, err
    assert "lost ok" in out and "solo:1" in out and "without finalizing" in out, out
    assert dev_shm() <= before


def test_kill_9_during_start_up_leaves_nothing(built, program, tmp_path):
    before = dev_shm()
    prog = program("p2p_suite")
    for delay in (0.0, 0.01, 0.05, 0.2):
        proc = launch(prog, "pairs", tmp_path / str(delay), 0, 2)
        time.sleep(delay)
        proc.kill()
        proc.communicate()
    assert dev_shm() <= before


def test_writers_fence_only_for_readers_that_sleep_without_the_barrier(built, program):
    """alpha's processes sleep without membarrier (TETHER_SHM_MEMBARRIER=0),
    beta's with it: every write to alpha, and alpha's writes (it did not
    register for the barrier), are fenced; beta's writes to beta are not.
    Five processes on this machine's CPUs sleep and wake all the time, and
    every message of the stream arrives, in order, whole."""
    prog = program("p2p_suite")
    fenced = ["env", "TETHER_SHM_MEMBARRIER=0", prog]
    proc = tether_run(["--name", "alpha", "-n", "2", *fenced, "stream", "1000", ":",
                       "--name", "beta", "-n", "3", prog, "stream", "1000"],
                      env=clean_env(TETHER_TRANSPORTS="shm"), timeout=300)
    assert proc.stdout.count("ok stream") == 5


def test_an_answer_to_a_peer_that_reached_us_first_needs_no_address(built):
    """A peer that opened a ring into this process's segment is reached
    back at once: the first answer to it settles its route without the
    rendezvous (`route_waits` 0; tests/python/first_contact.py)."""
    script = str(Path(__file__).parent / "python" / "first_contact.py")
    proc = tether_run(["--name", "f", "-n", "4", sys.executable, script],
                      env=clean_env(TETHER_TRANSPORTS="shm"))
    assert proc.stdout.count("ok first contact") == 4, proc.stdout + proc.stderr
