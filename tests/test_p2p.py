"""Point-to-point with MPI semantics between real processes: program
`alpha` of 2 ranks and `beta` of 3, every scenario of tests/c/p2p_suite.c
checked byte by byte inside the programs, once per transport set-up
(conftest.TRANSPORTS): TCP only, shared memory only, and mixed (two
pretend hosts: shared memory inside each, TCP between them)."""

import shutil

import pytest

from conftest import TRANSPORTS, clean_env, tether_run, universe

SCENARIOS = ["identity", "pairs", "wildcards", "truncation", "probe", "cancel", "odd", "errors", "blocking_order"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(built, program, scenario, transport):
    args, env = universe(program("p2p_suite"), scenario, transport=transport)
    proc = tether_run(args, env=env)
    assert proc.stdout.count(f"ok {scenario}") == 5


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ten_thousand_mixed_messages_keep_order_and_content(built, program, transport):
    # 5 processes in a ring, 2000 messages each of 0 B to 8 MiB, 4 tags.
    args, env = universe(program("p2p_suite"), "stream", "2000", transport=transport)
    proc = tether_run(args, env=env, timeout=300)
    assert proc.stdout.count("ok stream") == 5


def test_mixed_uses_shared_memory_inside_a_host_and_tcp_between(built, program):
    args, env = universe(program("p2p_suite"), "pairs", transport="mixed")
    env["TETHER_LOG_LEVEL"] = "info"
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok pairs") == 5
    out = proc.stdout + proc.stderr
    assert "[alpha:0]" in out and "reaching alpha:1 over shm" in out, out
    assert "reaching beta:0 over tcp" in out and "reaching beta:0 over shm" in out, out
    for line in out.splitlines():
        if line.startswith("[alpha:") and "reaching" in line:
            assert ("alpha:" in line.split("reaching")[1]) == (" over shm" in line), line


def test_shm_only_between_hosts_fails_naming_the_peer(built, program):
    args, env = universe(program("p2p_suite"), "pairs", transport="mixed")
    env["TETHER_TRANSPORTS"] = "shm"
    proc = tether_run(args, env=env, check=False)
    assert proc.returncode != 0
    assert "TETHER_ERR_TRANSPORT" in proc.stderr or "TETHER_ERR_TRANSPORT" in proc.stdout or "returned 16" in proc.stderr, proc.stderr
    assert "no transport in TETHER_TRANSPORTS=shm reaches" in proc.stderr and "another host" in proc.stderr, proc.stderr


def test_identity_follows_program_name_order(built, program):
    args, env = universe(program("p2p_suite"), "identity")
    proc = tether_run(args, env=env)
    lines = sorted(l for l in proc.stdout.splitlines() if "identity " in l and "ok" not in l)
    assert "[alpha:0] identity alpha rank 0 universe 0 of 5" in lines
    assert "[beta:2] identity beta rank 2 universe 4 of 5" in lines


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_eager_connections_and_tiny_eager_limit(built, program, transport):
    args, env = universe(program("p2p_suite"), "pairs", transport=transport)
    env.update(TETHER_CONNECT="eager", TETHER_EAGER_LIMIT="0")
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok pairs") == 5


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec (Debian's mpich) is not installed")
def test_segment_without_n_runs_an_mpi_launcher(built, program):
    prog = program("p2p_suite")
    proc = tether_run(["--name", "alpha", "mpiexec", "-n", "2", prog, "pairs", ":", "--name", "beta", "-n", "3", prog, "pairs"])
    assert proc.stdout.count("ok pairs") == 5
    # Each rank behind mpiexec labels its own lines once it has joined.
    assert "[alpha:0] ok pairs" in proc.stdout and "[alpha:1] ok pairs" in proc.stdout, proc.stdout


@pytest.mark.parametrize("transports", ["shm", "tcp"])
def test_two_threads_of_each_process_call_the_library_at_once(built, program, transports):
    """The C API's lock, biased to the first thread, lets a second thread
    in safely: two streams per process, in parallel, all intact."""
    prog = program("threads", extra=("-pthread",))
    proc = tether_run(["--name", "a", "-n", "1", prog, ":", "--name", "b", "-n", "1", prog],
                      env=clean_env(TETHER_TRANSPORTS=transports))
    assert proc.stdout.count("ok threads") == 2


@pytest.mark.parametrize("setup", ["tcp", "shm", "shm-small-ring"])
def test_a_flood_of_eager_sends_waits_in_order_and_completes_at_the_sender(built, program, setup):
    """3000 eager sends at once to a receiver that computes before it
    receives: the links give frames back (NoResource), the router keeps
    them in the peer's queue, every eager send completes, and the
    receiver gets every message in order (tests/c/p2p_suite.c, flood)."""
    env = {"tcp": {"TETHER_TRANSPORTS": "tcp"},
           "shm": {"TETHER_TRANSPORTS": "shm"},
           "shm-small-ring": {"TETHER_TRANSPORTS": "shm", "TETHER_SHM_RING_BYTES": "4096"}}[setup]
    proc = tether_run(["--name", "a", "-n", "2", program("p2p_suite"), "flood"], env=clean_env(**env), timeout=120)
    assert proc.stdout.count("ok flood") == 2, proc.stdout + proc.stderr
    full = int(proc.stdout.split("the link was full ")[1].split()[0])
    assert full > 0, "the link never filled: the flood did not reach back-pressure"
