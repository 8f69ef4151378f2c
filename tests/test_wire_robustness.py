"""Hostile bytes on a listening port: raw garbage, a wrong magic, a
truncated header, a connection that never speaks. Each is dropped and
logged with the remote address and what was expected; the two programs
still complete their exchange."""

import socket
import struct
import subprocess
import time

from conftest import WIRE_VERSION, clean_env


def read_address(rdv, program, rank, timeout=20):
    path = rdv / f"addr%{program}%{rank}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            tcp = path.read_text().split()[0]
            host, port = tcp.removeprefix("tcp=").rsplit(":", 1)
            return host, int(port)
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


def header(magic=b"TTHR", version=WIRE_VERSION, kind=1, seq=0, length=0):
    return magic + struct.pack("<HBBQQIiQQQ", version, kind, 0, seq, length, 0, 0, 0, 0, 0)


def test_garbage_is_dropped_and_the_exchange_completes(built, program, tmp_path):
    rdv = tmp_path / "rdv"
    gate = tmp_path / "go"
    prog = program("p2p_suite")
    procs = []
    # beta waits for the gate before it exchanges; alpha meanwhile waits in
    # tether_waitall, making progress, so it meets the junk while it waits.
    for name in ("alpha", "beta"):
        gated = {"TEST_GATE": gate} if name == "beta" else {}
        env = clean_env(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM=name, TETHER_PROGRAMS="alpha,beta", TETHER_TRANSPORTS="tcp",
                        TETHER_HANDSHAKE_TIMEOUT=1, **gated)
        procs.append(subprocess.Popen([prog, "pairs"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    idle = []
    try:
        for name in ("alpha", "beta"):
            addr = read_address(rdv, name, 0)
            for junk in (b"\x00\xffGET / HTTP/1.1\r\n\r\n" * 10, header(magic=b"XXXX"), header()[:20],
                         header(version=9), header(kind=4), header(length=1 << 40)):
                with socket.create_connection(addr, timeout=5) as s:
                    s.sendall(junk)
                    time.sleep(0.05)
            silent = socket.create_connection(addr, timeout=5)
            idle.append(silent)
        time.sleep(1.5)  # past TETHER_HANDSHAKE_TIMEOUT: the silent ones are dropped
        gate.write_text("go")
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for s in idle:
            s.close()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        assert "ok pairs" in out
        assert "bad magic" in err and "127.0.0.1:" in err, err
        assert f"unsupported protocol version: expected {WIRE_VERSION}, got 9" in err, err
        assert "before the handshake completed" in err, err
        assert "too large for a Hello frame" in err, err
    assert "no handshake within 1 s" in outs[0][1], outs[0][1]


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_thousand_idle_connections_neither_lock_out_a_peer_nor_grow_memory(built, program, tmp_path):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
    rdv = tmp_path / "rdv"
    gate = tmp_path / "go"
    prog = program("p2p_suite")
    procs = []
    for name in ("alpha", "beta"):
        gated = {"TEST_GATE": gate} if name == "beta" else {}
        env = clean_env(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM=name, TETHER_PROGRAMS="alpha,beta",
                        TETHER_TRANSPORTS="tcp", **gated)
        procs.append(subprocess.Popen([prog, "pairs"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    idle = []
    try:
        addr = read_address(rdv, "alpha", 0)
        time.sleep(0.2)
        before = rss_kib(procs[0].pid)
        for _ in range(1000):
            try:
                idle.append(socket.create_connection(addr, timeout=5))
            except OSError:
                break  # the backlog is full: alpha closes the oldest, not this process
        time.sleep(1.0)  # alpha accepts them while it waits
        grown = rss_kib(procs[0].pid) - before
        gate.write_text("go")
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for s in idle:
            s.close()
    assert len(idle) >= 500, f"only {len(idle)} connections could be opened"
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        assert "ok pairs" in out
    # 64 waiting handshakes of 4 KiB buffers and the sockets' state: 0.3 MiB
    # measured, where full-size buffers for every connection grew 18 MiB.
    assert grown < 4 * 1024, f"alpha grew by {grown} KiB with {len(idle)} idle connections"
    assert "connections wait for their handshake" in outs[0][1], outs[0][1]


def test_a_peer_of_another_protocol_version_is_told_and_refused_at_once(built, program, tmp_path):
    """Two builds of different protocol versions: the acceptor answers a
    connector of another version with a HelloReject in its own version
    (which the connector can tell apart), and a connector that gets an
    answer of another version gives that peer up at once with
    TETHER_ERR_PROTOCOL naming both versions, instead of retrying until
    its connect timeout."""
    import threading

    rdv = tmp_path / "rdv"
    rdv.mkdir()
    # beta exists only as entries pointing at a listener of the next version.
    other = WIRE_VERSION + 1
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    (rdv / "size%beta").write_text("1 nonce=00000000000000aa")
    (rdv / "addr%beta%0").write_text(f"tcp=127.0.0.1:{port} host=elsewhere pid=1")

    # Answered only once the test has probed alpha's own listener: alpha
    # gives up and exits at once on the answer.
    probed = threading.Event()

    def answer_in_another_version():
        listener.settimeout(30)
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(4096)
                probed.wait(30)
                conn.sendall(header(version=other, kind=2))
                time.sleep(1)
            except OSError:
                pass

    thread = threading.Thread(target=answer_in_another_version, daemon=True)
    thread.start()
    env = clean_env(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM="alpha", TETHER_PROGRAMS="alpha,beta",
                    TETHER_TRANSPORTS="tcp", TETHER_CONNECT_TIMEOUT=60)
    proc = subprocess.Popen([program("p2p_suite"), "pairs"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # The acceptor's side: a connector of version 9 is answered in its own.
        addr = read_address(rdv, "alpha", 0)
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(header(version=9))
            reply = b""
            while len(reply) < 56:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        assert reply[:4] == b"TTHR" and struct.unpack("<H", reply[4:6])[0] == WIRE_VERSION and reply[6] == 3, reply[:8]
        assert f"speaks protocol version {WIRE_VERSION}, the connecting one version 9".encode() in reply, reply
        probed.set()
        started = time.monotonic()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        listener.close()
    assert time.monotonic() - started < 20, "given up at once, not after the connect timeout"
    assert proc.returncode != 0
    assert "TETHER_ERR_PROTOCOL" in out + err, out + err
    assert f"speaks protocol version {other}, this process version {WIRE_VERSION}" in out + err, out + err
