"""Silent peers (docs/RELIABILITY.md, "Silent peers and heartbeats"): a
peer stopped with SIGSTOP is lost within TETHER_PEER_TIMEOUT on every
transport, with every pending operation with it ending in
TETHER_ERR_PEER_LOST; a peer that computes without calling Tether, or
that is resumed before the timeout, is not.

The programs (tests/c/silent_peer.c) are launched separately on a
rendezvous directory: universe rank 0 survives, rank 1 is the victim,
rank 2 (when there is one) a third process. Every wait has a hard limit."""

import queue
import signal
import subprocess
import threading
import time

import pytest

from conftest import clean_env

TIMEOUT = 2  # TETHER_PEER_TIMEOUT of these tests, in seconds
TRANSPORTS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    "file": {"TETHER_TRANSPORTS": "file"},
    # Payloads above 4 KiB through files, the rest on shared memory.
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "4096"},
}


class Universe:
    """`size` processes of program `live`, each line of their output
    collected by a thread so that a test waits for a line with a limit."""

    def __init__(self, prog, tmp_path, scenario, size, nbytes, extra=(), env=None):
        self.procs = []
        self.lines = [queue.Queue() for _ in range(size)]
        for rank in range(size):
            e = clean_env(TETHER_RENDEZVOUS=str(tmp_path / "rdv"), TETHER_PROGRAM="live", TETHER_RANK=rank,
                          TETHER_SIZE=size, TETHER_PEER_TIMEOUT=TIMEOUT, TETHER_CONNECT_TIMEOUT=20,
                          TETHER_FINALIZE_TIMEOUT=5, **(env or {}))
            p = subprocess.Popen([prog, scenario, str(nbytes), *map(str, extra)], env=e, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            threading.Thread(target=self._read, args=(rank, p), daemon=True).start()

    def _read(self, rank, proc):
        for line in proc.stdout:
            self.lines[rank].put(line.rstrip("\n"))
        self.lines[rank].put(None)

    def expect(self, rank, prefix, within):
        """The next line of `rank` that starts with `prefix`, within `within`
        seconds; fails naming what the processes said otherwise."""
        deadline = time.monotonic() + within
        while True:
            try:
                line = self.lines[rank].get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} from rank {rank} within {within} s; {self.report()}")
            if line is None:
                raise AssertionError(f"rank {rank} ended without {prefix!r}; {self.report()}")
            if line.startswith(prefix):
                return line

    def report(self):
        parts = []
        for rank, p in enumerate(self.procs):
            if p.poll() is not None:
                parts.append(f"rank {rank} exited {p.returncode}: {p.stderr.read()[-2000:]}")
        return " | ".join(parts) or "all still running"

    def signal(self, rank, sig):
        self.procs[rank].send_signal(sig)

    def finish(self, ranks, within=30):
        for rank in ranks:
            p = self.procs[rank]
            p.wait(timeout=within)
            assert p.returncode == 0, f"rank {rank} exited {p.returncode}: {p.stderr.read()[-2000:]}"

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def universe(built, program, tmp_path):
    made = []

    def start(scenario, size, nbytes, *extra, env=None):
        u = Universe(program("silent_peer"), tmp_path, scenario, size, nbytes, extra, env)
        made.append(u)
        return u

    yield start
    for u in made:
        u.kill_all()


def stop_victim_and_expect_loss(u, ranks_ready):
    for rank in ranks_ready:
        u.expect(rank, "ready", within=30)
    u.signal(1, signal.SIGSTOP)
    stopped = time.monotonic()
    line = u.expect(0, "lost ", within=TIMEOUT + 15)
    detected = time.monotonic() - stopped
    return line, detected


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("op,nbytes", [("recv", 64 << 10), ("recv", 64 << 20), ("send", 64 << 10), ("send", 64 << 20)])
def test_a_stopped_peer_fails_the_pending_operation_within_the_timeout(universe, transport, op, nbytes):
    env = dict(TRANSPORTS[transport])
    if op == "send":
        # Rendezvous, so that the send waits for the stopped receiver
        # (an eager send completes without it, as in MPI).
        env.update(TETHER_EAGER_LIMIT="1024", TETHER_FILE_EAGER_LIMIT="1024")
    u = universe(op, 2, nbytes, env=env)
    line, detected = stop_victim_and_expect_loss(u, (0, 1))
    assert "live:1" in line and f"TETHER_PEER_TIMEOUT={TIMEOUT}" in line and "no heartbeat from live:1" in line, line
    assert detected < TIMEOUT + 1, f"detected {detected:.2f} s after SIGSTOP: {line}"
    u.expect(0, "new lost", within=10)
    u.expect(0, "done 0", within=15)
    u.finish([0])


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_third_process_is_unaffected_by_the_loss(universe, transport):
    u = universe("recv", 3, 64 << 10, env=TRANSPORTS[transport])
    line, _ = stop_victim_and_expect_loss(u, (0, 1, 2))
    assert "no heartbeat from live:1" in line, line
    u.expect(0, "new lost", within=10)
    u.expect(0, "third ok", within=20)
    u.finish([0, 2])


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_collective_with_a_stopped_member_fails_on_every_survivor(universe, transport):
    u = universe("barrier", 3, 0, env=TRANSPORTS[transport])
    for rank in (0, 1, 2):
        u.expect(rank, "ready", within=30)
    u.signal(1, signal.SIGSTOP)
    stopped = time.monotonic()
    for rank in (0, 2):
        line = u.expect(rank, "lost ", within=TIMEOUT + 15)
        assert "live:1" in line and "PEER_TIMEOUT" in line, line
    assert time.monotonic() - stopped < TIMEOUT + 1
    u.finish([0, 2])


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_peer_computing_for_three_timeouts_is_not_lost(universe, transport):
    u = universe("compute", 2, 256 << 10, 3 * TIMEOUT, env=TRANSPORTS[transport])
    u.expect(0, "ready", within=30)
    u.expect(0, "compute ok", within=3 * TIMEOUT + 20)
    u.finish([0, 1])


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_peer_resumed_before_the_timeout_loses_nothing(universe, transport):
    u = universe("resume", 2, 64 << 10, env=TRANSPORTS[transport])
    u.expect(0, "ready", within=30)
    u.expect(1, "ready", within=30)
    u.signal(1, signal.SIGSTOP)
    time.sleep(TIMEOUT / 2)
    u.signal(1, signal.SIGCONT)
    u.expect(0, "resume ok", within=30)
    u.finish([0, 1])


def test_a_stopped_peer_that_resumes_after_its_loss_learns_it_was_given_up(universe):
    """The survivor gave the victim up; resumed, the victim's own wait (a
    receive from the survivor) fails too, instead of waiting on a link
    nobody reads."""
    u = universe("recv", 2, 64, env=dict(TRANSPORTS["shm"], LINGER_S=str(TIMEOUT + 3)))
    stop_victim_and_expect_loss(u, (0, 1))
    u.expect(0, "new lost", within=10)
    u.signal(1, signal.SIGCONT)
    line = u.expect(1, "victim ", within=TIMEOUT + 15)
    assert line.startswith("victim 13 ") and "live:0 gave this process up" in line, line
    u.finish([0])


def throttled_loopback_works():
    probe = "ip link set lo up && ip link set lo mtu 1500 && tc qdisc add dev lo root tbf rate 20mbit burst 32kb latency 400ms"
    try:
        return subprocess.run(["unshare", "-rn", "sh", "-c", probe], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_a_transfer_slower_than_the_timeout_does_not_trip_the_detector(built, program, tmp_path):
    """16 MiB through a loopback throttled to 20 Mbit/s (tc tbf, in a user
    and network namespace of its own) takes about 7 s, seven times the 1 s
    timeout; the heartbeats share the throttled queue with the data."""
    if not throttled_loopback_works():
        pytest.skip("no user network namespace with tc tbf here (unshare -rn)")
    prog = program("silent_peer")
    script = """
        ip link set lo up && ip link set lo mtu 1500 &&
        tc qdisc add dev lo root tbf rate 20mbit burst 32kb latency 400ms || exit 9
        TETHER_RANK=0 "$PROG" bulk 16777216 & a=$!
        TETHER_RANK=1 "$PROG" bulk 16777216 & b=$!
        wait $a; ra=$?; wait $b; rb=$?; echo "exit $ra $rb"
    """
    env = clean_env(PROG=prog, TETHER_RENDEZVOUS=str(tmp_path / "rdv"), TETHER_PROGRAM="live", TETHER_SIZE=2,
                    TETHER_TRANSPORTS="tcp", TETHER_PEER_TIMEOUT=1, TETHER_FINALIZE_TIMEOUT=5)
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert "exit 0 0" in proc.stdout, proc.stdout + proc.stderr
    took = int(proc.stdout.split("bulk ok ")[1].split()[0])
    assert took > 3000, f"the link was not slow ({took} ms): the test proves nothing"


KEYED = {"TETHER_KEY": "5ea1ed5ea1ed5ea1ed5ea1ed5ea1ed5e"}


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_sealed_heartbeats_detect_a_stopped_peer_and_spare_a_computing_one(universe, transport):
    """With the run's key every beat carries a MAC (docs/PROTOCOL.md); the
    detector works the same."""
    u = universe("recv", 2, 64 << 10, env=dict(TRANSPORTS[transport], **KEYED))
    line, detected = stop_victim_and_expect_loss(u, (0, 1))
    assert "no heartbeat from live:1" in line and detected < TIMEOUT + 1, (line, detected)
    u.finish([0])
    u.kill_all()
    u = universe("compute", 2, 256 << 10, 3 * TIMEOUT, env=dict(TRANSPORTS[transport], **KEYED))
    u.expect(0, "compute ok", within=3 * TIMEOUT + 20)
    u.finish([0, 1])


def test_a_sealed_given_up_beat_reaches_the_resumed_peer(universe):
    u = universe("recv", 2, 64, env=dict(TRANSPORTS["shm"], LINGER_S=str(TIMEOUT + 3), **KEYED))
    stop_victim_and_expect_loss(u, (0, 1))
    u.signal(1, signal.SIGCONT)
    line = u.expect(1, "victim ", within=TIMEOUT + 15)
    assert "live:0 gave this process up" in line, line
    u.finish([0])


def test_a_blackholed_network_loses_the_peer_on_both_sides_within_the_timeout(built, program, tmp_path):
    """A firewall that drops everything (or a cable pulled): in a network
    namespace of their own, two linked processes see their loopback turn
    into a black hole (tc tbf with a 1-byte bucket drops every packet,
    heartbeats and TCP alike). Each gives the other up within the timeout
    + 1 s with TETHER_ERR_PEER_LOST naming it; neither hangs."""
    if not throttled_loopback_works():
        pytest.skip("no user network namespace with tc tbf here (unshare -rn)")
    prog = program("silent_peer")
    script = """
        ip link set lo up || exit 9
        TETHER_RANK=0 "$PROG" recv 65536 > "$OUT/0" 2>&1 & a=$!
        TETHER_RANK=1 "$PROG" recv 65536 > "$OUT/1" 2>&1 & b=$!
        n=0
        until grep -q '^ready' "$OUT/0" && grep -q '^ready' "$OUT/1"; do
            sleep 0.05; n=$((n + 1))
            if [ $n -gt 600 ]; then kill -9 $a $b; echo "never ready"; exit 8; fi
        done
        tc qdisc add dev lo root tbf rate 1kbit burst 1 latency 1ms || exit 9
        wait $a; ra=$?; wait $b; rb=$?; echo "exit $ra $rb"
    """
    out = tmp_path / "out"
    out.mkdir()
    env = clean_env(PROG=prog, OUT=str(out), TETHER_RENDEZVOUS=str(tmp_path / "rdv"), TETHER_PROGRAM="live",
                    TETHER_SIZE=2, TETHER_TRANSPORTS="tcp", TETHER_PEER_TIMEOUT=TIMEOUT, TETHER_FINALIZE_TIMEOUT=2)
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)
    survivor, victim = (out / "0").read_text(), (out / "1").read_text()
    assert "exit 0 3" in proc.stdout, proc.stdout + proc.stderr + survivor + victim
    lost = next(line for line in survivor.splitlines() if line.startswith("lost "))
    assert "no heartbeat from live:1" in lost and int(lost.split()[1]) < (TIMEOUT + 1) * 1000, lost
    assert "victim 13 " in victim and "no heartbeat from live:0" in victim, victim
