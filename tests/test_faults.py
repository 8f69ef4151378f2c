"""The fault harness (issue 24): real processes, a fault-injecting proxy
(tests/faultproxy.py) on their TCP link, and kill -9 over every transport.

Three programs of one process each, launched separately
(tests/c/fault_peer.c): alpha (universe rank 0), beta (1), gamma (2).
alpha's and beta's listeners sit behind a FaultProxy each: they listen on
TETHER_TCP_PORT and publish the proxy's address with TETHER_TCP_PUBLISH,
so whoever dials them goes through the proxy. A link is dialled by
either side (a lazy connect from a send, or from a receive that links
with its peer before it sleeps); when both dial at once, the link dialled
by the lower rank is kept. So the alpha-beta link runs through beta's
proxy or alpha's, and every fault is armed on both: the frame edits
match one frame by its header (beta's tag 7), wherever it passes.

Every wait has a hard limit (subprocess timeouts); no test asserts a
tight timing. Detection times are printed (pytest -s) and measured over
20 runs by benches/liveness/kill_detect.py.
"""

import re
import signal
import socket
import subprocess
import time
import uuid
from collections import Counter

import pytest

from conftest import UCX_TLS, WIRE_VERSION, clean_env, needs_ucx
from faultproxy import DATA, EAGER, Edit, FaultProxy, Header

PROGRAMS = ("alpha", "beta", "gamma")
LIMIT = 60  # seconds any one process may take


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Universe:
    """alpha, beta and gamma launched separately on one rendezvous
    directory; `proxied` names the programs put behind a FaultProxy."""

    def __init__(self, prog, args, tmp_path, transports="tcp", proxied=(), extra=None, programs=PROGRAMS):
        self.rdv = tmp_path / "rdv"
        self.gate = tmp_path / "gate"
        self.files = tmp_path / "files"
        self.proxies = {}
        self.procs = {}
        self.out, self.err = {}, {}
        run_id = uuid.uuid4().hex
        for name in programs:
            env = dict(TETHER_RENDEZVOUS=self.rdv, TETHER_PROGRAM=name, TETHER_PROGRAMS=",".join(programs),
                       TETHER_RANK=0, TETHER_SIZE=1, TETHER_TRANSPORTS=transports, TETHER_RUN_ID=run_id,
                       TETHER_FILE_DIR=self.files, TEST_GATE=self.gate, **(extra or {}))
            if name in proxied:
                port = free_port()
                proxy = FaultProxy(("127.0.0.1", port), name=f"proxy-{name}").start()
                self.proxies[name] = proxy
                env.update(TETHER_TCP_PORT=port, TETHER_TCP_PUBLISH=proxy.url)
            self.out[name] = tmp_path / f"{name}.out"
            self.err[name] = tmp_path / f"{name}.err"
            with open(self.out[name], "w") as out, open(self.err[name], "w") as err:
                self.procs[name] = subprocess.Popen([prog, *args], env=clean_env(**env), stdout=out, stderr=err)

    def line(self, name, starts, timeout=LIMIT):
        """Waits until `name` printed a line starting with `starts`; returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ended = self.procs[name].poll() is not None
            for line in self.out[name].read_text().splitlines(keepends=True):
                if line.startswith(starts) and line.endswith("\n"):
                    return line
            if ended:
                break
            time.sleep(0.002)
        raise AssertionError(f"{name} never printed {starts!r}: {self.out[name].read_text()}{self.err[name].read_text()}")

    def open_gate(self):
        self.gate.write_text("go")

    def finish(self, timeout=LIMIT, skip=()):
        outs = {}
        for name, p in self.procs.items():
            if name in skip:
                continue
            p.wait(timeout=timeout)
            outs[name] = (p.returncode, self.out[name].read_text(), self.err[name].read_text())
        return outs

    def state(self):
        """What the proxies and processes show, for a failed wait (a flake
        seen once in CI: no proxied connection carried 256 KiB in 30 s)."""
        parts = []
        for name, proxy in self.proxies.items():
            with proxy.lock:
                conns = [(c.carried, c.closed) for c in proxy.connections]
            parts.append(f"proxy {name}: connections (carried, closed) {conns}")
        for name, p in self.procs.items():
            parts.append(f"{name}: exit {p.poll()}, out {self.out[name].read_text()[-400:]!r}, "
                         f"err {self.err[name].read_text()[-800:]!r}")
        return "; ".join(parts)

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        for proxy in self.proxies.values():
            proxy.stop()
            assert proxy.error is None, proxy.error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ok(outs, name, what):
    rc, out, err = outs[name]
    assert rc == 0 and f"ok {what}" in out, f"{name} exited {rc}:\n{out}\n{err}"
    return out, err


# --- a live link harmed through the proxy ---------------------------------

def tag7(h):
    return h.kind == EAGER and h.tag == 7


def oversized(frame):
    h = Header.decode(frame)
    h.payload_len = 1 << 63
    return h.encode()  # the payload is dropped: the receiver must refuse the header alone


def flip_seq(frame):
    out = bytearray(frame)
    out[8] ^= 1 << 2  # sequence number, byte 0, bit 2
    return bytes(out)


GARBAGE = b"\x00\xffGET / HTTP/1.1\r\n\r\n" * 4

# name: (frame edit, class alpha's receives end in, what alpha's error says)
TAMPERS = {
    "garbage": (lambda f: GARBAGE + f, "PROTOCOL", "bad magic: expected [54, 54, 48, 52] (\"TTHR\"), got [00, ff, 47, 45]"),
    "oversized_length": (oversized, "PROTOCOL",
                         "payload length 9223372036854775808 too large for a Eager frame (at most 4194304)"),
    # 20 bytes of the header, then the next frame: the receiver reads a
    # header made of both, whose length field is now part magic.
    "truncated_header": (lambda f: f[:20], "PROTOCOL", "too large for a Eager frame"),
    # The stream ends inside a header: what a crash mid-write looks like,
    # so PEER_LOST (a closed stream), naming where it ended.
    "truncated_header_then_close": (lambda f: Edit(f[:20], then="close"), "PEER_LOST",
                                    "closed in the middle of a frame without goodbye"),
    "bit_flip_in_header": (flip_seq, "PROTOCOL", "bad sequence number: expected "),
    "bit_flip_in_version": (lambda f: f[:4] + bytes([f[4] ^ 2]) + f[5:], "PROTOCOL",
                            f"unsupported protocol version: expected {WIRE_VERSION}, got {WIRE_VERSION ^ 2}"),
    "duplicated_frame": (lambda f: f + f, "PROTOCOL", "bad sequence number: expected "),
    "skipped_frame": (lambda f: b"", "PROTOCOL", "bad sequence number: expected "),
}


def oversized_data(head):
    h = Header.decode(head)
    h.payload_len = 1 << 63
    return h.encode()  # its payload follows as it comes


@pytest.mark.parametrize("tamper", [*TAMPERS, "oversized_data_length"])
def test_a_harmed_frame_on_a_live_link_fails_that_link_only(built, program, tmp_path, tamper):
    size = 64
    if tamper == "oversized_data_length":
        # The data of a rendezvous message (a size no other message has)
        # claims 2^63 bytes: refused against the receive it is for, before
        # a byte is placed.
        size = (1 << 20) + 7
        edit, klass, says = oversized_data, "PROTOCOL", f"data frame of {1 << 63} bytes where {size} were granted"
    else:
        edit, klass, says = TAMPERS[tamper]
    with Universe(program("fault_peer"), ["tamper", klass, str(size)], tmp_path, proxied=("alpha", "beta")) as u:
        u.line("alpha", "warm")
        u.line("beta", "warm")
        if size > 65536:
            rules = [p.on_frame(lambda h: h.kind == DATA and h.payload_len == size, edit, whole=False)
                     for p in u.proxies.values()]
        else:
            rules = [p.on_frame(tag7, edit) for p in u.proxies.values()]
        u.open_gate()
        outs = u.finish()
    assert sum(r.hits for r in rules) == 1, "the frame passed through neither proxy"
    out, err = ok(outs, "alpha", "tamper")
    ok(outs, "beta", "tamper")
    ok(outs, "gamma", "tamper")
    [line] = [ln for ln in out.splitlines() if ln.startswith("alpha: waitall")]
    assert f"waitall {klass}" in line and "beta:0" in line and says in line, line
    if tamper == "duplicated_frame":
        assert "statuses SUCCESS PROTOCOL" in line, line  # the first copy was good
    assert f"new send: {klass}" in out, out
    if klass == "PROTOCOL":
        assert "protocol error from beta:0" in err and "connection closed" in err, err
    if tamper in ("oversized_length", "oversized_data_length"):
        peak = [ln for ln in out.splitlines() if ln.startswith("peak KiB")][0].split()
        before, after = int(peak[3]), int(peak[5])
        assert after - before < 16 * 1024, f"alpha's peak memory grew {after - before} KiB: {peak}"


# --- resets, delays and stalls ----------------------------------------------

SIZES = {"0B": 0, "64KiB": 65536, "64MiB": 64 << 20}


@pytest.mark.parametrize("size", list(SIZES))
def test_a_reset_mid_transfer_is_peer_lost(built, program, tmp_path, size):
    """RST of the alpha-beta connection while beta's message of SIZE is on
    the wire (eager: the frame; rendezvous: 1 MiB into its data)."""
    n = SIZES[size]
    with Universe(program("fault_peer"), ["tamper", "PEER_LOST", str(n)], tmp_path, proxied=("alpha", "beta")) as u:
        u.line("alpha", "warm")
        u.line("beta", "warm")
        if n > 65536:
            rules = [p.on_frame(lambda h: h.kind == DATA and h.payload_len == n,
                                lambda head: Edit(head, then="reset", after=1 << 20), whole=False)
                     for p in u.proxies.values()]
        else:
            rules = [p.on_frame(tag7, lambda f: Edit(b"", then="reset")) for p in u.proxies.values()]
        start = time.monotonic()
        u.open_gate()
        outs = u.finish()
        took = time.monotonic() - start
    assert sum(r.hits for r in rules) == 1
    out, _ = ok(outs, "alpha", "tamper")
    beta_out, _ = ok(outs, "beta", "tamper")
    ok(outs, "gamma", "tamper")
    assert "waitall PEER_LOST" in out and "beta:0" in out, out
    assert "beta: PEER_LOST" in beta_out and "alpha:0" in beta_out, beta_out
    print(f"reset of {size}: all three done {took:.2f} s after the gate")


def test_delay_each_way_loses_and_reorders_nothing(built, program, tmp_path):
    """20 ms added each way on the link: the stream scenario (mixed sizes
    up to 8 MiB, both directions, ordering and contents checked) passes."""
    prog = program("p2p_suite")
    with Universe(prog, ["stream", "300"], tmp_path, proxied=("alpha", "beta"), programs=("alpha", "beta")) as u:
        for p in u.proxies.values():
            p.delay(0.02)
        u.open_gate()
        outs = u.finish(timeout=120)
        carried = sum(c.carried for p in u.proxies.values() for c in p.connections)
    for name in ("alpha", "beta"):
        ok(outs, name, "stream")
    assert carried > 1 << 20, f"the proxies carried only {carried} bytes"


def test_a_stall_shorter_than_any_timeout_resumes_with_nothing_lost(built, program, tmp_path):
    """The link stops forwarding for 1.5 s in the middle of the stream and
    resumes: nothing lost, reordered or failed (no heartbeat needed)."""
    prog = program("p2p_suite")
    with Universe(prog, ["stream", "400"], tmp_path, proxied=("alpha", "beta"), programs=("alpha", "beta")) as u:
        u.open_gate()
        deadline = time.monotonic() + 30
        while not any(c.carried > 256 << 10 for p in u.proxies.values() for c in p.live()):
            assert time.monotonic() < deadline, "no traffic through the proxies: " + u.state()
            time.sleep(0.01)
        for p in u.proxies.values():
            p.stall()
        time.sleep(1.5)
        for p in u.proxies.values():
            p.resume()
        outs = u.finish(timeout=120)
    for name in ("alpha", "beta"):
        ok(outs, name, "stream")


# --- kill -9 mid-transfer, every transport ----------------------------------

KILL_SETUPS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    # Under a cap of one link, alpha's small frames to beta go through
    # beta's mailbox, not a ring (docs/hints.md).
    "shm_capped": {"TETHER_TRANSPORTS": "shm", "TETHER_MAX_LINKS": "1"},
    "file": {"TETHER_TRANSPORTS": "file", "TETHER_PEER_TIMEOUT": "2"},
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "65536", "TETHER_PEER_TIMEOUT": "2"},
    # UCX over its TCP reports the dead endpoint; over its shared memory
    # Tether's own liveness (the peer's process descriptor) does.
    "ucx_tcp": {"TETHER_TRANSPORTS": "ucx", **UCX_TLS["tcp"]},
    "ucx_sm": {"TETHER_TRANSPORTS": "ucx", **UCX_TLS["sm"]},
}
KILL_PARAMS = [pytest.param(s, marks=needs_ucx) if s.startswith("ucx") else s for s in KILL_SETUPS]
# A bound with margin (the issue asks 1 s for tcp and shm, the file
# timeout, here 2 s, for files); measured figures: docs/RELIABILITY.md.
KILL_BOUND = {"tcp": 5.0, "shm": 5.0, "shm_capped": 5.0, "file": 2 + 5.0, "hybrid": 2 + 5.0, "ucx_tcp": 5.0, "ucx_sm": 5.0}


def fds(out, label):
    """alpha's descriptors at `label`: {fd: target}."""
    line = next(ln for ln in out.splitlines() if ln.startswith(f"fds {label}:"))
    return dict(re.findall(r" (\d+)=(.*?)(?= \d+=|$)", line.split(":", 1)[1]))


def memfd_maps(out, label):
    line = next(ln for ln in out.splitlines() if ln.startswith(f"memfd maps {label}:"))
    return int(line.split()[-1])


def kill_run(prog, tmp_path, setup, size):
    """One kill -9 of beta mid-transfer; returns (seconds from the kill to
    alpha's pending operations failing, the outputs, the universe, beta's
    pid)."""
    u = Universe(prog, ["kill", str(size)], tmp_path, transports=KILL_SETUPS[setup]["TETHER_TRANSPORTS"],
                 extra={k: v for k, v in KILL_SETUPS[setup].items() if k != "TETHER_TRANSPORTS"})
    try:
        u.line("alpha", "fds before")  # linked with gamma, not yet with beta
        u.open_gate()
        victim = int(u.line("beta", "victim ready").split()[-1])
        u.line("alpha", "survivor waiting")
        time.sleep(0.2)  # alpha is inside its wait
        killed = time.monotonic()
        u.procs["beta"].send_signal(signal.SIGKILL)
        lost = u.line("alpha", "lost at")
        took = float(lost.split()[2].rstrip(":")) - killed
        outs = u.finish(skip=("beta",))
    finally:
        u.close()
    return took, outs, u, victim


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("setup", KILL_PARAMS)
def test_kill_9_mid_transfer_fails_pending_work_and_leaves_nothing_behind(built, program, tmp_path, setup, size):
    took, outs, u, victim = kill_run(program("fault_peer"), tmp_path, setup, SIZES[size])
    out, err = ok(outs, "alpha", "kill")
    ok(outs, "gamma", "kill")
    print(f"kill -9 over {setup}, {size}: pending operations failed {took:.3f} s after the kill")
    assert took < KILL_BOUND[setup], f"detected {took:.2f} s after the kill"
    assert "waitall PEER_LOST" in out and "beta:0" in out, out
    assert "new send: PEER_LOST" in out, out
    # Every descriptor and shared-memory mapping the link with beta took is
    # given back: what alpha holds after is what it held before linking
    # (counted by target), and no pidfd watches beta's process. A pidfd
    # for gamma may come after "before": over UCX a process is watched
    # once its address is looked up, which runs beside the link.
    before, after = Counter(fds(out, "before").values()), Counter(fds(out, "after").values())
    left = {target: n for target, n in (after - before).items() if not target.startswith("pidfd:")}
    assert not left, f"left open: {after - before}"
    assert f"pidfd:{victim}" not in after, f"beta's process is still watched: {after}"
    assert memfd_maps(out, "after") <= memfd_maps(out, "before"), out
    # No file is left in the file transport's directory by the processes
    # that finalized, not even what alpha wrote for beta, which never took
    # it; the killed beta's own heartbeat (alive-1) stays: no one can tell
    # from a file alone that its writer is dead (docs/RELIABILITY.md).
    if u.files.exists():
        left = sorted(str(p.relative_to(u.files)).split("/", 1)[1] for p in u.files.rglob("*") if p.is_file())
        assert left in ([], ["alive-1"]), f"left behind in {u.files}: {left}"


# --- the published address -------------------------------------------------

def test_a_malformed_published_address_is_an_init_error(built, program, tmp_path):
    env = clean_env(TETHER_RENDEZVOUS=tmp_path, TETHER_PROGRAM="solo", TETHER_TCP_PUBLISH="proxy-host")
    out = subprocess.run([program("init_check")], env=env, capture_output=True, text=True, timeout=30).stdout
    assert out.startswith("rc=11 TETHER_ERR_INIT"), out
    assert 'TETHER_TCP_PUBLISH="proxy-host" is not an ip:port address' in out, out


def test_peers_dial_the_published_address(built, program, tmp_path):
    """alpha and beta listen on TETHER_TCP_PORT and publish their proxies'
    addresses: their link (whichever side dialled it) runs through one."""
    with Universe(program("p2p_suite"), ["pairs"], tmp_path, proxied=("alpha", "beta"),
                  programs=("alpha", "beta")) as u:
        published = {}
        deadline = time.monotonic() + LIMIT
        while len(published) < 2 and time.monotonic() < deadline:
            for name in ("alpha", "beta"):
                entry = u.rdv / f"addr%{name}%0"
                if entry.exists() and entry.read_text():
                    published[name] = entry.read_text().split()[0]
            time.sleep(0.01)
        u.open_gate()
        outs = u.finish()
        carried = sum(c.carried for p in u.proxies.values() for c in p.connections)
    for name in ("alpha", "beta"):
        ok(outs, name, "pairs")
        assert published[name] == f"tcp={u.proxies[name].url}", published
    assert carried > 65537 + 1000, f"the proxies carried {carried} bytes"
