"""A rendezvous reused after a run crashed in it (issue 24): the entries
that run left (sizes, nonces, addresses of processes now gone) must not
split the next run into two universes, salt its run name with an old
nonce, or send it to an old address. The next run is started with the
programs in the order that trusts old entries most: beta first, alpha,
whose size entry beta reads, a second later."""

import subprocess
import sys
import time

import pytest

from conftest import ROOT, TETHER, clean_env


def launch(command, rendezvous, sizes, extra):
    procs = []
    for name, size in sizes:
        for rank in range(size):
            env = clean_env(TETHER_RENDEZVOUS=rendezvous, TETHER_PROGRAM=name, TETHER_PROGRAMS="alpha,beta",
                            TETHER_RANK=rank, TETHER_SIZE=size, **extra)
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
    return procs


def crash_a_run(rendezvous, extra):
    """alpha of 2 and beta of 3 join, then all are killed (kill -9)."""
    script = str(ROOT / "tests" / "python" / "join_and_hang.py")
    procs = launch([sys.executable, script], rendezvous, [("alpha", 2), ("beta", 3)], extra)
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "joined"
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture(params=["directory", "server"])
def rendezvous(request, tmp_path):
    if request.param == "directory":
        yield str(tmp_path / "rdv")
        return
    server = subprocess.Popen([str(TETHER), "rendezvous", "serve"], stdout=subprocess.PIPE, text=True)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("sizes,transports", [
    ([("beta", 2), ("alpha", 1)], "shm,tcp"),   # other sizes: another universe id
    ([("beta", 3), ("alpha", 2)], "shm,tcp"),   # the same sizes: old addresses look right
    ([("beta", 3), ("alpha", 2)], "tcp"),
])
def test_a_run_after_a_crashed_one_ignores_what_it_left(built, python_package, program, tmp_path, rendezvous,
                                                         sizes, transports):
    extra = dict(TETHER_TRANSPORTS=transports, TETHER_CONNECT_TIMEOUT=20)
    crash_a_run(rendezvous, extra)
    prog = program("p2p_suite")
    procs = launch([prog, "pairs"], rendezvous, sizes[:1], extra)
    time.sleep(1)
    procs += launch([prog, "pairs"], rendezvous, sizes[1:], extra)
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        outs.append(out)
    assert all(p.returncode == 0 for p in procs), "\n---\n".join(outs)
    assert all("ok pairs" in o for o in outs)


def test_file_transport_after_a_crashed_run_is_one_run(built, python_package, program, tmp_path):
    """With files, beta taking alpha:0's old nonce named its run directory
    differently from alpha's: the run split in two and waited for ever."""
    rdv = str(tmp_path / "rdv")
    extra = dict(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(tmp_path / "files"), TETHER_CONNECT_TIMEOUT=20,
                 TETHER_FILE_PEER_TIMEOUT=20)
    crash_a_run(rdv, extra)
    prog = program("p2p_suite")
    procs = launch([prog, "pairs"], rdv, [("beta", 1)], extra)
    time.sleep(1)
    procs += launch([prog, "pairs"], rdv, [("alpha", 1)], extra)
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out = "(hung) " + p.communicate()[0]
        outs.append(out)
    assert all(p.returncode == 0 for p in procs), "\n---\n".join(outs)
