"""The fault proxy itself (tests/faultproxy.py), with plain sockets: each
fault does what it says, and nothing else."""

import socket
import struct
import threading
import time

import pytest

from faultproxy import DATA, EAGER, HEADER_LEN, Edit, FaultProxy, Header


@pytest.fixture
def pair():
    """A proxy in front of a listening socket: yields (client, server, proxy)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    proxy = FaultProxy(server.getsockname()).start()
    client = socket.create_connection(proxy.address, timeout=5)
    server.settimeout(5)
    far, _ = server.accept()
    far.settimeout(5)
    yield client, far, proxy
    for s in (client, far, server):
        s.close()
    proxy.stop()
    assert proxy.error is None, proxy.error


def recv_exactly(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def test_forwards_both_ways(pair):
    client, far, proxy = pair
    client.sendall(b"ping" * 1000)
    assert recv_exactly(far, 4000) == b"ping" * 1000
    far.sendall(b"pong")
    assert recv_exactly(client, 4) == b"pong"
    big = bytes(range(256)) * 40000  # 10 MiB, past the proxy's high water
    t = threading.Thread(target=client.sendall, args=(big,))
    t.start()
    assert recv_exactly(far, len(big)) == big
    t.join()
    [conn] = proxy.live()
    assert conn.up.read == 4000 + len(big) and conn.down.read == 4


def test_delay_holds_bytes(pair):
    client, far, proxy = pair
    proxy.delay(0.3)
    start = time.monotonic()
    client.sendall(b"a")
    far.sendall(b"b")
    assert recv_exactly(far, 1) == b"a" and recv_exactly(client, 1) == b"b"
    assert time.monotonic() - start >= 0.29
    proxy.delay(0)
    start = time.monotonic()
    client.sendall(b"c")
    assert recv_exactly(far, 1) == b"c"
    assert time.monotonic() - start < 0.29


def test_stall_keeps_the_connection_and_resume_loses_nothing(pair):
    client, far, proxy = pair
    proxy.stall()
    client.sendall(b"x" * 1000)
    far.settimeout(0.3)
    with pytest.raises(socket.timeout):
        far.recv(1)
    proxy.resume()
    far.settimeout(5)
    assert recv_exactly(far, 1000) == b"x" * 1000


def test_drop_discards_the_next_bytes(pair):
    client, far, proxy = pair
    proxy.drop(3, direction="up")
    client.sendall(b"abcdef")
    assert recv_exactly(far, 3) == b"def"


def test_truncate_closes_after_n_bytes(pair):
    client, far, proxy = pair
    proxy.truncate(after=5, direction="up")
    client.sendall(b"0123456789")
    assert recv_exactly(far, 10) == b"01234"  # then EOF
    assert far.recv(1) == b""


def test_flip_changes_one_bit_at_an_offset(pair):
    client, far, proxy = pair
    client.sendall(b"\x00" * 10)
    assert recv_exactly(far, 10) == b"\x00" * 10
    proxy.flip(12, bit=3, direction="up")  # offsets count from the connection's start
    client.sendall(b"\x00" * 10)
    assert recv_exactly(far, 10) == b"\x00\x00\x08" + b"\x00" * 7


def test_inject_inserts_bytes(pair):
    client, far, proxy = pair
    proxy.inject(b"junk", direction="down")
    assert recv_exactly(client, 4) == b"junk"


def test_reset_sends_rst_to_both_sides(pair):
    client, far, proxy = pair
    client.sendall(b"hello")
    assert recv_exactly(far, 5) == b"hello"
    proxy.reset()
    for s in (client, far):
        with pytest.raises(ConnectionResetError):
            s.recv(1)


def test_reset_after_n_bytes(pair):
    client, far, proxy = pair
    proxy.reset(after=100, direction="up")
    client.sendall(b"y" * 1000)
    got = b""
    with pytest.raises(ConnectionResetError):
        while True:
            chunk = far.recv(4096)
            if not chunk:
                break
            got += chunk
    assert len(got) <= 100


def test_blackhole_accepts_reads_and_never_answers(pair):
    client, far, proxy = pair
    proxy.blackhole()
    client.sendall(b"lost")
    far.sendall(b"lost too")
    for s in (client, far):
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(1)
    late = socket.create_connection(proxy.address, timeout=5)
    late.sendall(b"x" * 100000)  # read and discarded: never blocks
    late.settimeout(0.3)
    with pytest.raises(socket.timeout):
        late.recv(1)
    late.close()


def frame(kind, seq, payload=b"", tag=0):
    return Header(b"TTHR", 1, kind, 0, seq, len(payload), 0, tag, len(payload), 0, 0).encode() + payload


def test_on_frame_edits_one_whole_frame_at_its_boundary(pair):
    client, far, proxy = pair
    rule = proxy.on_frame(lambda h: h.tag == 7, lambda f: f + f)  # duplicate it
    stream = frame(EAGER, 0, b"a" * 10, tag=1) + frame(EAGER, 1, b"b" * 5, tag=7) + frame(EAGER, 2, tag=8)
    for i in range(0, len(stream), 7):  # in odd pieces
        client.sendall(stream[i:i + 7])
        time.sleep(0.001)
    want = frame(EAGER, 0, b"a" * 10, tag=1) + frame(EAGER, 1, b"b" * 5, tag=7) * 2 + frame(EAGER, 2, tag=8)
    assert recv_exactly(far, len(want)) == want
    assert rule.hits == 1


def test_on_frame_header_only_then_reset_mid_payload(pair):
    client, far, proxy = pair
    proxy.on_frame(lambda h: h.kind == DATA, lambda head: Edit(head, then="reset", after=1000), whole=False)
    payload = b"z" * 100000
    sender = threading.Thread(target=lambda: client.sendall(frame(DATA, 0, payload)), daemon=True)
    sender.start()
    got = b""
    with pytest.raises(ConnectionResetError):
        while True:
            chunk = far.recv(65536)
            if not chunk:
                break
            got += chunk
    assert len(got) == HEADER_LEN + 1000
    assert Header.decode(got).payload_len == len(payload)


def test_unreachable_target_resets_the_client():
    # A port bound but not listening refuses connections, and stays ours
    # for the whole test (a closed one may be taken by another process).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()
    with s, FaultProxy(dead) as proxy:
        # The reset may come before the client's connect returns.
        with pytest.raises((ConnectionResetError, ConnectionRefusedError)):
            with socket.create_connection(proxy.address, timeout=5) as c:
                c.sendall(b"x")
                assert c.recv(1) == b""
                raise ConnectionResetError


def test_header_round_trip():
    raw = struct.pack("<4sHBBQQIiQQQ", b"TTHR", 1, 4, 0, 5, 6, 7, -8, 9, 10, 11)
    assert Header.decode(raw).encode() == raw
