"""Point-to-point with MPI semantics between real processes over loopback
TCP: program `alpha` of 2 ranks and `beta` of 3, every scenario of
tests/c/p2p_suite.c checked byte by byte inside the programs."""

import shutil

import pytest

from conftest import tether_run

SCENARIOS = ["identity", "pairs", "wildcards", "truncation", "probe", "cancel", "odd", "errors"]


def universe(prog, *args):
    return ["--name", "alpha", "-n", "2", prog, *args, ":", "--name", "beta", "-n", "3", prog, *args]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(built, program, scenario):
    proc = tether_run(universe(program("p2p_suite"), scenario))
    assert proc.stdout.count(f"ok {scenario}") == 5


def test_ten_thousand_mixed_messages_keep_order_and_content(built, program):
    # 5 processes in a ring, 2000 messages each of 0 B to 8 MiB, 4 tags.
    proc = tether_run(universe(program("p2p_suite"), "stream", "2000"), timeout=300)
    assert proc.stdout.count("ok stream") == 5


def test_identity_follows_program_name_order(built, program):
    proc = tether_run(universe(program("p2p_suite"), "identity"))
    lines = sorted(l for l in proc.stdout.splitlines() if "identity " in l and "ok" not in l)
    assert "[alpha:0] identity alpha rank 0 universe 0 of 5" in lines
    assert "[beta:2] identity beta rank 2 universe 4 of 5" in lines


def test_eager_connections_and_tiny_eager_limit(built, program):
    from conftest import clean_env

    env = clean_env(TETHER_CONNECT="eager", TETHER_EAGER_LIMIT="0")
    proc = tether_run(universe(program("p2p_suite"), "pairs"), env=env)
    assert proc.stdout.count("ok pairs") == 5


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec (Debian's mpich) is not installed")
def test_segment_without_n_runs_an_mpi_launcher(built, program):
    prog = program("p2p_suite")
    proc = tether_run(["--name", "alpha", "mpiexec", "-n", "2", prog, "pairs", ":", "--name", "beta", "-n", "3", prog, "pairs"])
    assert proc.stdout.count("ok pairs") == 5
    assert "[alpha] ok pairs" in proc.stdout
