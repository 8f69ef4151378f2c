"""Start-up: programs launched separately (no `tether run`), joined through
a rendezvous directory or `tether rendezvous serve`; and the errors a user
gets when a program is missing or misnamed."""

import subprocess
import time

import pytest

from conftest import TETHER, clean_env, tether_run


def launch_separately(prog, rendezvous, scenario="pairs", extra=None):
    """Starts alpha (2 ranks) and beta (3 ranks) as five unrelated processes."""
    procs = []
    for name, size in (("alpha", 2), ("beta", 3)):
        for rank in range(size):
            env = clean_env(
                TETHER_RENDEZVOUS=rendezvous, TETHER_PROGRAM=name, TETHER_PROGRAMS="beta,alpha",
                TETHER_RANK=rank, TETHER_SIZE=size, **(extra or {}),
            )
            procs.append(subprocess.Popen([prog, scenario], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs, timeout=60):
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, out + err
        outs.append(out)
    return outs


def test_separate_launch_through_a_directory(built, program, tmp_path):
    outs = finish(launch_separately(program("p2p_suite"), str(tmp_path / "rdv")))
    assert all("ok pairs" in o for o in outs)


def test_separate_launch_through_rendezvous_serve(built, program):
    server = subprocess.Popen([str(TETHER), "rendezvous", "serve"], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("tcp://127.0.0.1:")
        outs = finish(launch_separately(program("p2p_suite"), url))
        assert all("ok pairs" in o for o in outs)
    finally:
        server.kill()
        server.wait()


def test_missing_program_times_out_naming_it(built, program, tmp_path):
    env = clean_env(TETHER_RENDEZVOUS=str(tmp_path), TETHER_PROGRAM="sim", TETHER_PROGRAMS="sim,ocean", TETHER_CONNECT_TIMEOUT=2)
    start = time.monotonic()
    out = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30).stdout
    assert out.startswith("rc=12 TETHER_ERR_TIMEOUT"), out
    assert "ocean" in out and "did not join within 2 s" in out, out
    assert time.monotonic() - start < 20


def test_program_not_in_the_list_is_an_init_error(built, program, tmp_path):
    env = clean_env(TETHER_RENDEZVOUS=str(tmp_path), TETHER_PROGRAM="sim", TETHER_PROGRAMS="ocean,ml")
    out = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30).stdout
    assert out.startswith("rc=11 TETHER_ERR_INIT"), out
    assert '"sim" is missing from TETHER_PROGRAMS' in out, out


def test_bad_setting_value_and_unknown_setting(built, program, tmp_path):
    env = clean_env(TETHER_PROGRAM="solo", TETHER_EAGER_LIMIT="lots", TETHER_EAGRE_LIMIT="1")
    proc = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30)
    assert proc.stdout.startswith("rc=11") and "TETHER_EAGER_LIMIT" in proc.stdout, proc.stdout
    env = clean_env(TETHER_PROGRAM="solo", TETHER_EAGRE_LIMIT="1")
    proc = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30)
    assert proc.stdout.startswith("rc=0"), proc.stdout
    assert "unknown setting TETHER_EAGRE_LIMIT" in proc.stderr, proc.stderr


def test_peer_whose_address_refuses_fails_naming_it(built, program, tmp_path):
    # beta:0 publishes a size and an address nobody listens on: a send to it
    # must end in TETHER_ERR_TRANSPORT naming beta:0 and the address, not hang.
    rdv = tmp_path / "rdv"
    rdv.mkdir()
    (rdv / "size%beta").write_text("1")
    (rdv / "addr%beta%0").write_text("tcp=127.0.0.1:1 host=x pid=1")
    env = clean_env(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAM="alpha", TETHER_PROGRAMS="alpha,beta",
                    TETHER_CONNECT_TIMEOUT=2, TETHER_RANK=0, TETHER_SIZE=1)
    proc = subprocess.run([program("p2p_suite"), "pairs"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "TETHER_ERR_TRANSPORT" in proc.stderr and "beta:0" in proc.stderr, proc.stderr
    assert "could not be reached over tcp" in proc.stderr and "127.0.0.1:1" in proc.stderr, proc.stderr


@pytest.mark.parametrize("transports", ["tcp", "shm"])
def test_lost_peer_fails_pending_work_instead_of_hanging(built, program, transports):
    proc = tether_run(["--name", "alpha", "-n", "2", program("p2p_suite"), "lost", ":", "--name", "beta", "-n", "1", program("p2p_suite"), "lost"],
                      env=clean_env(TETHER_TRANSPORTS=transports))
    assert "peer loss reported" in proc.stdout


@pytest.mark.parametrize("transports", ["tcp", "shm"])
def test_abort_ends_every_process_of_the_universe(built, program, tmp_path, transports):
    # Launched separately (no launcher to kill anyone): rank 0 exits with
    # the aborting process's code because the abort reached it on the wire.
    procs = []
    for rank in range(2):
        env = clean_env(TETHER_RENDEZVOUS=tmp_path, TETHER_PROGRAM="solo", TETHER_RANK=rank, TETHER_SIZE=2,
                        TETHER_TRANSPORTS=transports)
        procs.append(subprocess.Popen([program("p2p_suite"), "abort"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = [p.communicate(timeout=30) for p in procs]
    assert [p.returncode for p in procs] == [7, 7], results
    assert "solo:1 aborted the universe with code 7" in results[0][1]


def test_a_rank_claimed_twice_fails_at_join_naming_the_first_claimant(built, program, tmp_path):
    """A forgotten TETHER_RANK: two processes claim sim:0. The second is
    refused at once, naming the first (live) one; an entry left by a
    process that is gone (the first, once killed) is replaced."""
    rdv = tmp_path / "rdv"
    env = clean_env(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAM="sim", TETHER_PROGRAMS="sim,ocean",
                    TETHER_RANK=0, TETHER_SIZE=1, TETHER_CONNECT_TIMEOUT=30)
    first = subprocess.Popen([program("init_check")], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (rdv / "addr%sim%0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        out = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30).stdout
        assert time.monotonic() - start < 10
        assert out.startswith("rc=") and "TETHER_ERR_INIT" in out, out
        assert f"sim:0 is claimed twice in rendezvous {rdv}: by pid {first.pid}" in out, out
    finally:
        first.kill()
        first.wait()
    # The killed claimant's entry stays behind; a new sim:0 replaces it and
    # waits for ocean as usual (a timeout naming ocean, not a duplicate).
    short = dict(env, TETHER_CONNECT_TIMEOUT="2")
    out = subprocess.run([program("init_check")], env=short, capture_output=True, text=True, timeout=30).stdout
    assert "TETHER_ERR_TIMEOUT" in out and "ocean" in out, out


def test_tether_run_names_the_killed_process_not_the_one_it_took_down(built, python_package, tmp_path):
    """kill -9 of one process makes its peer fail within milliseconds: the
    launcher sees both exits, in the scheduler's order, and must name the
    killed one (5 trials)."""
    import os
    import signal
    import sys

    from conftest import ROOT

    script = str(ROOT / "tests" / "python" / "blame_peer.py")
    for trial in range(5):
        launcher = subprocess.Popen(
            [str(TETHER), "run", "--timeout", "60", "--name", "a", "-n", "1", sys.executable, script, "victim", ":",
             "--name", "b", "-n", "1", sys.executable, script, "witness"],
            env=clean_env(TETHER_TRANSPORTS="tcp"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = launcher.stdout.readline()
            assert "victim pid" in line, line
            os.kill(int(line.split()[-1]), signal.SIGKILL)
            out, err = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
        blamed = [ln for ln in err.splitlines() if ln.startswith("tether run: ")]
        assert blamed and blamed[0].startswith("tether run: a:0 killed by signal 9"), (trial, err)
        assert launcher.returncode == 128 + 9, (trial, launcher.returncode, err)


def test_a_stale_size_entry_fails_fast_naming_the_rendezvous(built, program, tmp_path):
    """An earlier run left size/alpha = 2 in the rendezvous directory; beta
    starts first and believes it, alpha (1 process now) rewrites it: the
    two joined different universes. Their handshake is refused for good,
    so alpha's operations fail at once naming the directory, with one
    warning per process instead of one per retry."""
    rdv = tmp_path / "rdv"
    rdv.mkdir()
    (rdv / "size%alpha").write_text("2 nonce=0000000000000001")
    prog = program("p2p_suite")

    def env(name):
        return clean_env(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAM=name, TETHER_PROGRAMS="alpha,beta",
                         TETHER_RANK=0, TETHER_SIZE=1, TETHER_CONNECT_TIMEOUT=3, TETHER_TRANSPORTS="tcp")

    beta = subprocess.Popen([prog, "pairs"], env=env("beta"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 20
        while not (rdv / "addr%beta%0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        alpha = subprocess.run([prog, "pairs"], env=env("alpha"), capture_output=True, text=True, timeout=30)
        took = time.monotonic() - start
        beta_out, _ = beta.communicate(timeout=30)
    finally:
        beta.kill()
        beta.wait()
    out = alpha.stdout + alpha.stderr
    assert alpha.returncode != 0, out
    assert "TETHER_ERR_INIT: beta:0 joined another universe than this process (alpha of 1, beta of 1)" in out, out
    assert f"rendezvous {rdv} holds entries of an earlier run" in out, out
    assert took < 2.5, f"alpha took {took:.1f} s, less than its 3 s connect timeout expected"
    assert out.count("WARN") <= 2 and beta_out.count("WARN") <= 2, out + beta_out


@pytest.mark.parametrize("transports", ["tcp", "shm,tcp"])
def test_a_receive_from_a_peer_that_died_before_contact_fails(built, python_package, tmp_path, transports):
    """Separately launched: `b` receives from `a`, which joined and died
    before sending anything. The receive links with `a` (a route and a
    connection are made for a receive too), so the death is seen: an
    error within the connect timeout, not a wait for ever."""
    import sys

    from conftest import ROOT

    script = str(ROOT / "tests" / "python" / "early_death.py")
    # One run id for both: without it, `b` joining after `a` died would
    # take a's entry for a crashed earlier run's (docs/RELIABILITY.md).
    common = dict(TETHER_RENDEZVOUS=str(tmp_path / "rdv"), TETHER_PROGRAMS="a,b", TETHER_RANK=0, TETHER_SIZE=1,
                  TETHER_CONNECT_TIMEOUT=3, TETHER_TRANSPORTS=transports, TETHER_RUN_ID="early-death")
    crash = subprocess.Popen([sys.executable, script, "crash"], env=clean_env(TETHER_PROGRAM="a", **common))
    start = time.monotonic()
    waiter = subprocess.run([sys.executable, script, "wait", "0"], env=clean_env(TETHER_PROGRAM="b", **common),
                            capture_output=True, text=True, timeout=60)
    crash.wait(timeout=30)
    assert crash.returncode == 3
    assert waiter.stdout.startswith("ok "), waiter.stdout + waiter.stderr
    assert "a:0" in waiter.stdout, waiter.stdout
    assert time.monotonic() - start < 20
    if transports.startswith("shm"):
        # On one host with shared memory the process is seen gone: lost.
        assert waiter.stdout.startswith("ok PeerLostError: TETHER_ERR_PEER_LOST: a:0 exited or was killed"), \
            waiter.stdout



@pytest.mark.parametrize("transports", ["tcp", "shm"])
def test_finalize_with_a_send_pending_returns_within_the_finalize_timeout(built, program, tmp_path, transports):
    prog = program("finalize_pending")
    procs = []
    for rank in (0, 1):
        env = clean_env(TETHER_RENDEZVOUS=tmp_path / "rdv", TETHER_PROGRAM="p", TETHER_PROGRAMS="p",
                        TETHER_RANK=rank, TETHER_SIZE=2, TETHER_TRANSPORTS=transports,
                        TETHER_FINALIZE_TIMEOUT=2)
        procs.append(subprocess.Popen([prog], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        out, err = procs[0].communicate(timeout=15)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        procs[1].communicate()
    assert procs[0].returncode == 0, out + err
    seconds = float(out.split("finalized in ")[1].split()[0])
    assert 1.5 < seconds < 10, out
    assert "goodbye within" in err and "TETHER_FINALIZE_TIMEOUT" in err, err
