"""Communicators and collectives between real processes, checked inside the
programs against serial references (tests/c/coll_suite.c): every collective
of DESIGN 3.5, blocking and non-blocking, every valid (type, op) pair,
counts 0, 1, 7, 1000 and 1 MiB worth, on a universe of one process and on
three programs of 1, 2 and 4 processes, and data movement on two programs
of 4 (the large broadcast's scatter-ring needs 8); communicators from programs and
from universe ranks (the odd ranks' one runs every collective, every pair
and every count), two overlapping ones running every collective
alternately; non-blocking collectives interleaved with point-to-point,
and advancing while their starter only posts point-to-point operations
(tests/c/coll_overlap.c); invalid arguments."""

import pytest

from conftest import clean_env, tether_run

SCENARIOS = ["reductions", "movement", "comms", "nonblocking", "errors"]


def three_programs(prog, *args):
    return [
        "--name", "a", "-n", "1", prog, *args, ":",
        "--name", "b", "-n", "2", prog, *args, ":",
        "--name", "c", "-n", "4", prog, *args,
    ]


@pytest.fixture
def suite(program):
    return program("coll_suite", ["-lm"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_one_process_universe(built, suite, scenario):
    proc = tether_run(["--name", "solo", "-n", "1", suite, scenario])
    assert f"[solo:0] ok {scenario}" in proc.stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_three_programs_of_one_two_and_four(built, suite, scenario):
    proc = tether_run(three_programs(suite, scenario), timeout=400)
    assert proc.stdout.count(f"ok {scenario}") == 7


def test_eight_processes_move_data_with_the_large_message_algorithms(built, suite):
    # Only from 8 processes does a broadcast of 512 KiB or more scatter the
    # buffer and gather it around a ring (coll/tuning.rs); every data
    # movement collective at every count, between real processes.
    proc = tether_run(["--name", "a", "-n", "4", suite, "movement", ":",
                       "--name", "b", "-n", "4", suite, "movement"], timeout=300)
    assert proc.stdout.count("ok movement") == 8


def test_aliased_buffers_are_refused_naming_them(built, suite):
    # The checks themselves run in coll_suite's errors scenario; this one
    # reads the message it printed.
    proc = tether_run(["--name", "solo", "-n", "1", suite, "errors"])
    assert "aliasing reported: TETHER_ERR_ARG: allreduce: sendbuf (32 bytes at 0x" in proc.stdout
    assert "MPI forbids aliased buffers" in proc.stdout


def test_mismatched_counts_are_reported_with_the_peer(built, suite):
    proc = tether_run(three_programs(suite, "errors"))
    assert "TETHER_ERR_TRUNCATE: allreduce on communicator" in proc.stdout
    assert "rank 0 (a:0) sent more bytes" in proc.stdout
    assert "sent 32 bytes where 64 were expected" in proc.stdout


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_nonblocking_collective_advances_in_point_to_point_posts(built, program, tmp_path, transport):
    """Rank 0 only posts isend/irecv after starting an ibcast; rank 1's
    blocking bcast must still finish (tests/c/coll_overlap.c)."""
    prog = program("coll_overlap")
    marker = str(tmp_path / "bcast-done")
    proc = tether_run(["--name", "a", "-n", "2", prog, marker],
                      env=clean_env(TETHER_TRANSPORTS=transport), timeout=60)
    assert proc.stdout.count("ok overlap") == 2
