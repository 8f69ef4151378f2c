"""The ucx transport (TETHER_TRANSPORTS=ucx): Tether's frames as UCP active
messages, run here over UCX's own TCP (pinned to loopback) and shared
memory. The point-to-point, collective, one-sided and active-message
suites give the same results as over Tether's own transports; a program
without UCX is reached by the next transport in the order; a peer killed
mid-run fails pending work instead of hanging.

UCX is loaded at run time, never linked: Tether builds and runs where UCX
is absent, and `tether info` says whether UCX loads here and why not.
(The binding's own tests are crates/tether-ucx/tests.)"""

import shutil
import subprocess
import sys

import pytest

from conftest import LIB, ROOT, TETHER, UCX_TLS, clean_env, needs_ucx, tether_run, universe

TLS = list(UCX_TLS)


def ucx_env(env, tls, transports="ucx"):
    env.update(TETHER_TRANSPORTS=transports, **UCX_TLS[tls])
    return env


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_nothing_links_against_ucx(built):
    for binary in (TETHER, LIB / "libtether.so"):
        dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True,
                                 check=True).stdout
        needed = [line for line in dynamic.splitlines() if "NEEDED" in line]
        assert needed, dynamic
        assert not any("libucp" in line or "libucs" in line for line in needed), needed


def info_ucx_line(**env):
    out = subprocess.run([str(TETHER), "info"], capture_output=True, text=True, check=True,
                         env=clean_env(**env)).stdout
    lines = [line for line in out.splitlines() if line.strip().startswith("ucx ")]
    assert len(lines) == 1, out
    return lines[0]


def test_info_says_why_ucx_is_not_usable_when_the_library_is_missing(built):
    line = info_ucx_line(TETHER_UCX_LIB="libucp.so.99")
    assert "not usable" in line and "cannot load libucp.so.99" in line, line


@needs_ucx
def test_info_names_the_ucx_version_when_it_loads(built):
    line = info_ucx_line()
    assert "usable: UCX 1." in line and "active messages" in line, line


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
@pytest.mark.parametrize("scenario", ["pairs", "wildcards", "truncation", "probe", "cancel", "odd", "blocking_order"])
def test_p2p_scenarios_over_ucx(built, program, scenario, tls):
    args, env = universe(program("p2p_suite"), scenario)
    proc = tether_run(args, env=ucx_env(env, tls))
    assert proc.stdout.count(f"ok {scenario}") == 5


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
def test_ten_thousand_mixed_messages_keep_order_and_content_over_ucx(built, program, tls):
    # 5 processes in a ring, 2000 messages each of 0 B to 8 MiB, 4 tags:
    # the large ones go by UCX's rendezvous straight into the receive.
    args, env = universe(program("p2p_suite"), "stream", "2000")
    proc = tether_run(args, env=ucx_env(env, tls), timeout=300)
    assert proc.stdout.count("ok stream") == 5


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
def test_peers_on_other_hosts_over_ucx(built, program, tls):
    # alpha and beta on two pretend hosts: their endpoints use UCX's peer
    # error handling (refused by UCX's shared memory, which the first
    # endpoint's maker finds and tells the other).
    args, env = universe(program("p2p_suite"), "stream", "300", transport="mixed")
    proc = tether_run(args, env=ucx_env(env, tls), timeout=200)
    assert proc.stdout.count("ok stream") == 5


# Reductions over 7 processes take a minute on two cores whatever the
# transport: they run once, over UCX's shared memory.
@needs_ucx
@pytest.mark.parametrize("scenario,tls", [("reductions", "sm"), ("movement", "sm"), ("movement", "tcp")])
def test_collectives_over_ucx(built, program, scenario, tls):
    suite = program("coll_suite", ["-lm"])
    args = ["--name", "a", "-n", "1", suite, scenario, ":", "--name", "b", "-n", "2", suite, scenario,
            ":", "--name", "c", "-n", "4", suite, scenario]
    proc = tether_run(args, env=ucx_env(clean_env(), tls), timeout=400)
    assert proc.stdout.count(f"ok {scenario}") == 7


@needs_ucx
@pytest.mark.parametrize("rma", ["on", "off"])
@pytest.mark.parametrize("tls", TLS)
@pytest.mark.parametrize("scenario", ["putget", "atomics", "range", "passive", "computing", "lost"])
def test_one_sided_over_ucx(built, program, scenario, tls, rma):
    """Windows with their puts and gets as UCX RMA (TETHER_UCX_RMA=on)
    and as frames (off, what `auto` picks on this machine)."""
    args, env = universe(program("rma_suite"), scenario)
    proc = tether_run(args, env=ucx_env(env, tls) | {"TETHER_UCX_RMA": rma})
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
@pytest.mark.parametrize("rma, native", [("on", True), ("off", False), ("auto", True)])
def test_window_operations_go_as_ucx_rma_when_chosen(python_package, tls, rma, native):
    """With TETHER_UCX_RMA=on (and `auto` between processes of one host)
    a window put and get move their bytes by the target's UCX key, and a
    fetch-and-add and a compare-and-swap are UCX atomics (8 bytes each),
    which the counters of remote memory show; with `off` all are frames."""
    script = str(ROOT / "tests" / "python" / "ucx_rma_check.py")
    env = ucx_env(clean_env(TETHER_UCX_RMA=rma), tls)
    proc = tether_run(["--name", "a", "-n", "2", sys.executable, script, "ucx"], env=env)
    put, got = (65536, 65536 + 16) if native else (0, 0)
    assert f"rma 0 put {put} got {got}" in proc.stdout, proc.stdout + proc.stderr
    assert "rma 1 put 0 got 0" in proc.stdout, proc.stdout + proc.stderr


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
@pytest.mark.parametrize("scenario", ["accumulate", "atomics"])
def test_python_atomics_as_ucx_atomics(python_package, scenario, tls):
    """The Python accumulate and atomics scenarios (every rank's own
    window included, a compare-and-swap lock) with UCX's atomics."""
    suite = str(ROOT / "tests" / "python" / "rma_suite.py")
    args, env = universe(sys.executable, suite, scenario)
    proc = tether_run(args, env=ucx_env(env, tls) | {"TETHER_UCX_RMA": "on"}, timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5, proc.stdout + proc.stderr


@needs_ucx
def test_auto_sends_frames_to_peers_on_other_hosts_without_rdma(python_package):
    """Without an RDMA network UCX emulates RMA over tcp, slower than
    frames: `auto` keeps frames for peers on other hosts."""
    script = str(ROOT / "tests" / "python" / "ucx_rma_check.py")
    env = ucx_env(clean_env(), "tcp")
    proc = tether_run(["--name", "a", "env", "TETHER_HOST_ID=host-a", sys.executable, script, "ucx", ":",
                       "--name", "b", "env", "TETHER_HOST_ID=host-b", sys.executable, script, "ucx"], env=env)
    assert "rma 0 put 0 got 0" in proc.stdout, proc.stdout + proc.stderr
    assert "rma 1 put 0 got 0" in proc.stdout, proc.stdout + proc.stderr


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
@pytest.mark.parametrize("scenario", ["many", "reply", "deadlock", "unregistered"])
def test_active_messages_over_ucx(built, program, scenario, tls):
    args, env = universe(program("am_suite"), scenario)
    proc = tether_run(args, env=ucx_env(env, tls))
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr


@needs_ucx
def test_a_program_without_ucx_is_reached_by_the_next_transport(built, program):
    # beta cannot load UCX: alpha's ranks talk to each other over ucx and to
    # beta over tcp, and the suite's results are the same.
    prog = program("p2p_suite")
    args = ["--name", "alpha", "-n", "2", prog, "stream", "200", ":", "--name", "beta", "-n", "3",
            "env", "TETHER_UCX_LIB=libucp.so.99", prog, "stream", "200"]
    env = ucx_env(clean_env(TETHER_STATS="1"), "tcp", transports="ucx,tcp")
    proc = tether_run(args, env=env, timeout=120)
    assert proc.stdout.count("ok stream") == 5
    out = proc.stdout + proc.stderr
    assert "ucx is in TETHER_TRANSPORTS but not usable here: cannot load libucp.so.99" in out, out
    for rank in ("alpha:0", "alpha:1"):
        assert f"{rank}: ucx.links 1" in out and f"{rank}: tcp.links 1" in out, out
    assert "beta:0: tcp.links 2" in out and "beta:0: ucx.links" not in out, out


def test_ucx_alone_where_it_does_not_load_names_why(built, program):
    args, env = universe(program("p2p_suite"), "pairs")
    env.update(TETHER_TRANSPORTS="ucx", TETHER_UCX_LIB="libucp.so.99", TETHER_CONNECT_TIMEOUT="10")
    proc = tether_run(args, env=env, timeout=60, check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "TETHER_ERR_TRANSPORT" in out and "no transport in TETHER_TRANSPORTS=ucx reaches" in out, out
    assert "cannot load libucp.so.99" in out, out


@needs_ucx
def test_a_large_message_lands_whole_over_ucx(built, program):
    # 3 GiB in one message: UCX's rendezvous fetches it into the receive.
    prog = program("big_message")
    env = ucx_env(clean_env(), "sm")
    proc = tether_run(["--name", "a", "-n", "1", prog, ":", "--name", "b", "-n", "1", prog],
                      env=env, timeout=300)
    assert "received 3221225472 bytes intact" in proc.stdout


@needs_ucx
@pytest.mark.parametrize("tls", TLS)
def test_python_and_c_over_ucx(built, python_package, program, tls):
    # A C simulation and a Python model (numpy, zero-copy) over UCX.
    peer = program("py_peer")
    script = ROOT / "tests" / "python" / "c_peer.py"
    args = ["--name", "csim", "-n", "2", peer, ":", "--name", "pymodel", "-n", "2", sys.executable, str(script)]
    proc = tether_run(args, env=ucx_env(clean_env(), tls))
    assert proc.stdout.count("ok c-python") == 4
