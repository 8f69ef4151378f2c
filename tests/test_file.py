"""The `file` and `hybrid` transports.

- The point-to-point suite (tests/c/p2p_suite.c: every scenario, and
  2000 mixed messages from 0 B to 8 MiB per process) with
  TETHER_TRANSPORTS=file and with hybrid (a low threshold, so that large
  payloads go through files while small messages and control take the
  socket: order must hold across the two paths).
- Two programs in two network namespaces with no link between them,
  sharing a directory: they couple with `file`, and fail naming the peer
  with `tcp` alone.
- Corrupted, truncated, foreign-run, stray and half-written files in the
  inbox: never delivered, reported, and the real messages still arrive.
- A peer killed mid-run is detected by its heartbeat.
- Large payloads in parts (several files): sizes at the part boundaries,
  large and small messages on one tag in order, a corrupted part refused
  and replaced, a file that does not continue the payload failing its
  receive, and a sender that stops between parts lost.
"""

import os
import shutil
import signal
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import WIRE_VERSION, clean_env, tether_run
from test_p2p import SCENARIOS

# hybrid: alpha and beta on two pretend hosts, so hybrid runs over shm
# inside each and over tcp between them; payloads above 64 KiB by file.
SETUPS = {
    "file": {"TETHER_TRANSPORTS": "file"},
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "65536"},
}


def universe(prog, *args, setup):
    alpha = ["env", "TETHER_HOST_ID=host-a", prog, *args]
    beta = ["env", "TETHER_HOST_ID=host-b", prog, *args]
    return ["--name", "alpha", "-n", "2", *alpha, ":", "--name", "beta", "-n", "3", *beta], clean_env(**SETUPS[setup])


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_p2p_scenario(built, program, scenario, setup, tmp_path):
    args, env = universe(program("p2p_suite"), scenario, setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    proc = tether_run(args, env=env)
    assert proc.stdout.count(f"ok {scenario}") == 5
    assert list(tmp_path.iterdir()) == [], "the run left files behind"


@pytest.mark.parametrize("setup", SETUPS)
def test_two_thousand_mixed_messages_keep_order_and_content(built, program, setup, tmp_path):
    args, env = universe(program("p2p_suite"), "stream", "2000", setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    env["TETHER_LOG_LEVEL"] = "info"
    proc = tether_run(args, env=env, timeout=300)
    assert proc.stdout.count("ok stream") == 5
    if setup == "hybrid":
        assert "hybrid payloads only" in proc.stderr, "no payload went through a file"
    assert list(tmp_path.iterdir()) == []


# --- two namespaces, one directory ----------------------------------------

def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@pytest.fixture
def two_namespaces():
    """Two network namespaces, each with only its own loopback up."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) is not installed")
    names = [f"tether-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    made = []
    try:
        for name in names:
            r = ip("netns", "add", name)
            if r.returncode != 0:
                pytest.skip(f"cannot create a network namespace here: {r.stderr.strip()}")
            made.append(name)
            assert ip("netns", "exec", name, "ip", "link", "set", "lo", "up").returncode == 0
        yield names
    finally:
        for name in made:
            ip("netns", "delete", name)


def in_namespaces(namespaces, prog, rdv, **settings):
    procs = []
    for ns, name in zip(namespaces, ["left", "right"]):
        env = clean_env(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAMS="left,right", TETHER_PROGRAM=name,
                        **settings)
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, prog], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        outs.append((p.returncode, out, err))
    return outs


def test_namespaces_without_a_route_couple_through_files(built, program, tmp_path, two_namespaces):
    prog = program("file_peer")
    # The namespaces really have no route: tcp alone fails, naming the peer.
    outs = in_namespaces(two_namespaces, prog, tmp_path / "rdv-tcp", TETHER_TRANSPORTS="tcp",
                         TETHER_CONNECT_TIMEOUT=3)
    for (rc, out, err), peer in zip(outs, ["right:0", "left:0"]):
        assert rc == 3, (out, err)
        assert out.startswith("error TETHER_ERR_TRANSPORT:") and peer in out, out
        assert "could not be reached over tcp" in out and "Connection refused" in out, out
    # The same programs through the shared directory alone.
    outs = in_namespaces(two_namespaces, prog, tmp_path / "rdv-file", TETHER_TRANSPORTS="file")
    for rc, out, err in outs:
        assert rc == 0 and "exchanged 12 ok" in out, (out, err)


# --- bad files in the inbox -------------------------------------------------

def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def fnv1a(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def message_file(run_name, sender, receiver, seq, payload, tag=0, kind=4):
    """A well-formed file (docs/PROTOCOL.md, file transport) holding an
    eager frame of `payload` (or a frame of another `kind`) from `sender`
    to `receiver`, written independently of the library."""
    frame = struct.pack("<4sHBBQQIiQQQ", b"TTHR", WIRE_VERSION, kind, 0, seq, len(payload), 0, tag, 0, 0, 0)
    head = struct.pack("<4sHHQIIQQI", b"TTHF", 1, 0, fnv1a(run_name), sender, receiver, seq, len(payload),
                       crc32c(payload))
    crc = crc32c(frame, crc32c(head))
    return head + struct.pack("<I", crc) + frame + payload


def publish(path, data):
    """Writes `data` under a temporary name and renames it to `path`, as a
    writer of the format must (a reader may look at any moment)."""
    temp = path.with_name(f".tmp-test-{path.name}")
    temp.write_bytes(data)
    os.rename(temp, path)


def test_a_file_written_by_the_documented_format_is_delivered(built, program, tmp_path):
    # Universe rank 0 ("fake") exists only as files this test writes by
    # hand: its rendezvous entries (with its start-up nonce), its heartbeat,
    # a message, a message whose payload is corrupted, and a goodbye. The
    # real process (rank 1) receives the good message, refuses the bad one,
    # and finalizes once the goodbye takes the refused file's place. So the
    # format in docs/PROTOCOL.md is what the library reads.
    run, nonce = "crafted", 0x1234_5678_9ABC_DEF0
    run_id = f"{run}/{nonce:016x}"
    rdv, root = tmp_path / "rdv", tmp_path / "files"
    rdv.mkdir()
    (rdv / "size%fake").write_text(f"1 nonce={nonce:016x}")
    (rdv / "addr%fake%0").write_text("tcp=127.0.0.1:1 host=elsewhere pid=1")
    inbox = root / f"run-{run}" / "to-1"
    inbox.mkdir(parents=True)
    (root / f"run-{run}" / "alive-0").write_text("1\n")
    (inbox / "0-0.msg").write_bytes(message_file(run_id, 0, 1, 0, b"hello from a file", tag=7))
    bad = message_file(run_id, 0, 1, 1, b"corrupted payload", tag=8)
    (inbox / "0-1.msg").write_bytes(bad[:-1] + b"?")
    env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(root), TETHER_RUN_ID=run,
                    TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAMS="fake,real", TETHER_PROGRAM="real")
    proc = subprocess.Popen([program("file_peer"), "receive"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (inbox / "0-1.msg.rejected-0").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        publish(inbox / "0-1.msg", message_file(run_id, 0, 1, 1, b"", kind=8))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "received 17 bytes tag 7: hello from a file" in out, out + err
    refused = [l for l in err.splitlines() if "TETHER_ERR_FILE" in l]
    assert len(refused) == 1 and "to-1/0-1.msg" in refused[0] and "payload checksum mismatch" in refused[0], err
    # It consumed the good files and said goodbye to rank 0 with a file.
    assert sorted(p.name for p in inbox.iterdir()) == ["0-1.msg.rejected-0"]
    assert sorted(p.name for p in (root / f"run-{run}" / "to-0").iterdir()) == ["1-0.msg"]


def test_bad_files_are_never_delivered_and_the_run_completes(built, program, tmp_path):
    run = "inject"
    root = tmp_path / "files"
    inbox = root / f"run-{run}" / "to-1"
    inbox.mkdir(parents=True)
    # An earlier run under the same TETHER_RUN_ID left a message behind:
    # its run id (the name salted with that run's rank 0 nonce) differs.
    good = message_file(f"{run}/{0:016x}", 0, 1, 0, b"x" * 100)
    (inbox / "0-0.msg").write_bytes(good)                                   # an earlier run's
    (inbox / "0-1.msg").write_bytes(good[:70])                              # truncated
    (inbox / "0-2.msg").write_bytes(message_file("older-run", 0, 1, 2, b"old"))  # another run's
    (inbox / "0-3.msg").write_bytes(b"\0" * 200)                             # garbage
    (inbox / "0-4.msg").mkdir()                                             # unreadable
    (inbox / ".tmp-0-4242-0").write_bytes(good[:50])                        # writer killed mid-file
    os.utime(inbox / ".tmp-0-4242-0", (1, 1))
    (inbox / "notes.txt").write_text("not a message")
    (root / "run-older").mkdir()                                            # a stale run
    env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(root), TETHER_RUN_ID=run)
    proc = tether_run(["--name", "solo", "-n", "2", program("file_peer"), "24"], env=env)
    assert proc.stdout.count("exchanged 24 ok") == 2, proc.stdout
    err = proc.stderr
    for name, problem in [("0-0.msg", "belongs to another run"), ("0-1.msg", "truncated"),
                          ("0-2.msg", "belongs to another run"), ("0-3.msg", "bad magic"),
                          ("0-4.msg", "cannot read it")]:
        line = next((l for l in err.splitlines() if f"to-1/{name}" in l and "TETHER_ERR_FILE" in l), None)
        assert line and problem in line, (name, err)
    assert ".tmp-0-4242-0: a temporary file left by a writer" in err, err
    assert "notes.txt: not a file of this transport" in err, err
    assert "1 directory of other runs" in err and "run-older" in err, err
    left = sorted(p.name for p in inbox.iterdir())
    assert left == [".tmp-0-4242-0", "0-0.msg.rejected-0", "0-1.msg.rejected-0", "0-2.msg.rejected-0",
                    "0-3.msg.rejected-0", "0-4.msg.rejected-0", "notes.txt"], left


def test_a_killed_peer_is_lost_by_its_heartbeat(built, program, tmp_path):
    prog = program("p2p_suite")
    procs = []
    for rank in (0, 1):
        env = clean_env(TETHER_RENDEZVOUS=str(tmp_path), TETHER_PROGRAM="solo", TETHER_RANK=rank, TETHER_SIZE=2,
                        TETHER_TRANSPORTS="file", TETHER_PEER_TIMEOUT=2)
        procs.append(subprocess.Popen([prog, "victim"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    survivor, victim = procs
    try:
        assert "victim ready" in victim.stdout.readline()
        assert "survivor waiting" in survivor.stdout.readline()
        victim.send_signal(signal.SIGKILL)
        out, err = survivor.communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    assert survivor.returncode == 0, err
    assert "lost ok" in out and "no heartbeat from solo:1" in out and "TETHER_PEER_TIMEOUT=2" in out, out


def test_an_unusable_directory_fails_naming_it(built, program, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the directory should be")
    env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(blocked))
    proc = tether_run(["--name", "solo", "-n", "2", program("file_peer")], env=env, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "error TETHER_ERR_FILE:" in proc.stdout and str(blocked) in proc.stdout, proc.stdout
    assert "cannot create the inbox" in proc.stdout, proc.stdout


def test_hybrid_without_a_usable_directory_sends_payloads_on_the_socket(built, program, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the directory should be")
    env = clean_env(TETHER_TRANSPORTS="hybrid", TETHER_HYBRID_THRESHOLD="65536", TETHER_FILE_DIR=str(blocked))
    args = ["--name", "a", "-n", "1", "env", "TETHER_HOST_ID=host-a", program("file_peer"), ":",
            "--name", "b", "-n", "1", "env", "TETHER_HOST_ID=host-b", program("file_peer")]
    proc = tether_run(args, env=env)
    assert proc.stdout.count("exchanged 12 ok") == 2, proc.stdout
    assert "large payloads go on the socket" in proc.stderr and str(blocked) in proc.stderr, proc.stderr


# --- large payloads in several files ---------------------------------------

# Data frames above this many bytes are written as parts of at most this
# size (crates/tether/src/transport/file/chunks.rs, CHUNK); the tests below
# check by the debug log that the sizes they pick do cross it.
CHUNK = 4 << 20


def parts_logged(stderr):
    """The number of files of each payload sent in parts, as logged."""
    return [int(l.rsplit(" in ", 1)[1].split()[0]) for l in stderr.splitlines() if " files" in l and "data of " in l]


def test_payloads_at_part_boundaries_arrive_whole(built, program, tmp_path):
    # All by rendezvous (a low eager limit), so that the data of each size
    # goes in one file up to CHUNK and in parts above.
    lens = [CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK + 5]
    env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(tmp_path), TETHER_LOG_LEVEL="debug",
                    TETHER_FILE_EAGER_LIMIT=65536)
    proc = tether_run(["--name", "solo", "-n", "2", program("file_peer"), "sizes", ",".join(map(str, lens))],
                      env=env, timeout=120)
    assert proc.stdout.count(f"sizes {len(lens)} ok") == 2, proc.stdout + proc.stderr[-3000:]
    # Each process sent every size above CHUNK in ceil(size / CHUNK) files.
    expected = sorted(2 * [-(-n // CHUNK) for n in lens if n > CHUNK])
    assert sorted(parts_logged(proc.stderr)) == expected, proc.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("setup", SETUPS)
def test_large_and_small_messages_on_one_tag_keep_their_order(built, program, setup, tmp_path):
    prog = [program("file_peer"), "interleave", "24"]
    args = ["--name", "alpha", "-n", "1", "env", "TETHER_HOST_ID=host-a", *prog, ":",
            "--name", "beta", "-n", "1", "env", "TETHER_HOST_ID=host-b", *prog]
    env = clean_env(**SETUPS[setup], TETHER_FILE_DIR=str(tmp_path), TETHER_LOG_LEVEL="debug")
    proc = tether_run(args, env=env, timeout=120)
    assert proc.stdout.count("interleaved 24 ok") == 2, proc.stdout + proc.stderr[-3000:]
    if setup == "file":
        # 9 MiB, 4 MiB + 1 and 8 MiB + 3 in each of 3 rounds, both ways.
        assert sorted(parts_logged(proc.stderr)) == sorted(2 * 3 * [3, 2, 3]), proc.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


def frame(kind, seq, payload_len, msg_size=0, tag=0, sender_req=0, receiver_req=0):
    return struct.pack("<4sHBBQQIiQQQ", b"TTHR", WIRE_VERSION, kind, 0, seq, payload_len, 0, tag, msg_size, sender_req,
                       receiver_req)


def framed_file(run_name, sender, receiver, seq, head, payload=b""):
    """A file of the documented format carrying frame header `head`."""
    prefix = struct.pack("<4sHHQIIQQI", b"TTHF", 1, 0, fnv1a(run_name), sender, receiver, seq, len(payload),
                         crc32c(payload))
    return prefix + struct.pack("<I", crc32c(head, crc32c(prefix))) + head + payload


class FakeSender:
    """Universe rank 0 as files this test writes by hand, sending 250 bytes
    by rendezvous to a real process (rank 1, `file_peer receive`): its
    rendezvous entries, its heartbeat and a request to send (Rts). Once the
    real process has answered with a clear-to-send file, `part` makes the
    data's parts, which the test publishes in the inbox."""

    TEXT = b"".join(b"line %d of a payload streamed in files. " % i for i in range(10))[:250]
    SENDER_REQ, TAG = 0xABC, 7

    def __init__(self, tmp_path, program, **settings):
        run, nonce = "parts", 0x0FED_CBA9_8765_4321
        self.run_id = f"{run}/{nonce:016x}"
        rdv, root = tmp_path / "rdv", tmp_path / "files"
        rdv.mkdir()
        (rdv / "size%fake").write_text(f"1 nonce={nonce:016x}")
        (rdv / "addr%fake%0").write_text("tcp=127.0.0.1:1 host=elsewhere pid=1")
        self.rundir = root / f"run-{run}"
        self.inbox = self.rundir / "to-1"
        self.inbox.mkdir(parents=True)
        (self.rundir / "alive-0").write_text("1\n")
        size = len(self.TEXT)
        rts = frame(5, 0, 0, size, self.TAG, self.SENDER_REQ)
        (self.inbox / "0-0.msg").write_bytes(framed_file(self.run_id, 0, 1, 0, rts))
        env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(root), TETHER_RUN_ID=run,
                        TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAMS="fake,real", TETHER_PROGRAM="real",
                        **settings)
        self.proc = subprocess.Popen([program("file_peer"), "receive"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        cts = self.rundir / "to-0" / "1-0.msg"
        self.wait_for(cts)
        head = cts.read_bytes()[48:104]
        kind, granted = head[6], struct.unpack_from("<Q", head, 32)[0]
        assert (kind, granted) == (6, size), head
        self.receiver_req = struct.unpack_from("<Q", head, 48)[0]

    def wait_for(self, path):
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.01)
        assert path.exists(), f"{path} did not appear"

    def part(self, seq, start, end):
        payload = self.TEXT[start:end]
        head = frame(7, seq, len(payload), len(self.TEXT), self.TAG, self.SENDER_REQ, self.receiver_req)
        return framed_file(self.run_id, 0, 1, seq, head, payload)

    def publish(self, seq, data):
        publish(self.inbox / f"0-{seq}.msg", data)

    def finish(self):
        try:
            return self.proc.communicate(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_a_bad_part_of_a_payload_is_refused_and_the_real_one_completes_it(built, program, tmp_path):
    # The data in three parts, the second one first with a flipped payload
    # byte. The bad part must be refused (moved aside, TETHER_ERR_FILE
    # naming it), never delivered; the real second part then takes its
    # name, and the receive completes with exactly the sent bytes.
    fake = FakeSender(tmp_path, program)
    try:
        fake.publish(1, fake.part(1, 0, 100))
        bad = fake.part(2, 100, 200)
        fake.publish(2, bad[:-7] + bytes([bad[-7] ^ 0x20]) + bad[-6:])
        fake.wait_for(fake.inbox / "0-2.msg.rejected-0")
        assert fake.proc.poll() is None, "the receive ended on a bad part"
        fake.publish(2, fake.part(2, 100, 200))
        fake.publish(3, fake.part(3, 200, 250))
        fake.publish(4, framed_file(fake.run_id, 0, 1, 4, frame(8, 4, 0)))
    finally:
        out, err = fake.finish()
    assert fake.proc.returncode == 0, out + err
    assert f"received 250 bytes tag 7: {fake.TEXT.decode()}" in out, out + err
    refused = [l for l in err.splitlines() if "TETHER_ERR_FILE" in l]
    assert len(refused) == 1, err
    assert "to-1/0-2.msg" in refused[0] and "payload checksum mismatch" in refused[0], refused
    assert "part of 100 bytes at offset 100 of a 250-byte payload" in refused[0], refused
    assert sorted(p.name for p in fake.inbox.iterdir()) == ["0-2.msg.rejected-0"]


@pytest.mark.parametrize("second", ["another receive", "too long", "not data"])
def test_a_sound_file_that_does_not_continue_a_payload_fails_its_receive(built, program, tmp_path, second):
    # A file that passes every check of the format but is not the next
    # part of the payload begun (the sender broke the protocol): the
    # receive fails naming the file, and no byte past the first part is
    # delivered.
    fake = FakeSender(tmp_path, program)
    try:
        fake.publish(1, fake.part(1, 0, 100))
        size = len(fake.TEXT)
        heads = {
            "another receive": frame(7, 2, 100, size, fake.TAG, fake.SENDER_REQ, fake.receiver_req + 1),
            "too long": frame(7, 2, 200, size, fake.TAG, fake.SENDER_REQ, fake.receiver_req),
            "not data": frame(4, 2, 100, 0, fake.TAG),
        }
        payload = fake.TEXT[100:200] if second != "too long" else fake.TEXT[50:250]
        fake.publish(2, framed_file(fake.run_id, 0, 1, 2, heads[second], payload))
    finally:
        out, err = fake.finish()
    assert fake.proc.returncode == 3, out + err
    assert out.startswith("error TETHER_ERR_PROTOCOL:") and "to-1/0-2.msg" in out, out + err
    assert ("bytes of the 250-byte payload" if second == "too long" else "not the next part") in out, out


def test_a_sender_that_stops_between_parts_is_lost(built, program, tmp_path):
    # The first part arrives, then nothing, and the sender's heartbeat
    # never changes: the receive fails once TETHER_PEER_TIMEOUT has
    # passed, instead of waiting for the rest forever.
    fake = FakeSender(tmp_path, program, TETHER_PEER_TIMEOUT=2)
    try:
        fake.publish(1, fake.part(1, 0, 100))
    finally:
        out, err = fake.finish()
    assert fake.proc.returncode == 3, out + err
    assert out.startswith("error TETHER_ERR_PEER_LOST:") and "heartbeat" in out, out + err


# --- sealed files (a run with a key) ------------------------------------------

def prove(key, label, *parts):
    """HMAC-SHA256 of tether-auth: the label and each part preceded by its
    length (8 bytes, little-endian)."""
    import hashlib
    import hmac
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (label.encode(), *parts):
        mac.update(struct.pack("<Q", len(part)) + part)
    return mac.digest()


def sealed_entry(key, name, value):
    return f"{value} mac={prove(key, 'tether rendezvous entry v1', name.encode(), value.encode()).hex()}"


def sealed_file(key, *args, **kwargs):
    """`message_file` sealed with `key`: flag bit 0, and the MAC of the
    payload and the prefix after the payload (docs/PROTOCOL.md)."""
    plain = message_file(*args, **kwargs)
    head = bytearray(plain[:104])
    head[6:8] = struct.pack("<H", 1)
    head[44:48] = struct.pack("<I", crc32c(bytes(head[48:104]), crc32c(bytes(head[:44]))))
    payload = plain[104:]
    return bytes(head) + payload + prove(key, "tether file v1", payload, bytes(head))


def test_a_keyed_run_consumes_only_files_sealed_with_its_key(built, program, tmp_path):
    # As the documented-format test, with TETHER_KEY: the fake rank 0's
    # entries and files are sealed by hand. A well-formed file without the
    # seal, and one sealed with another key, are refused and moved aside;
    # the genuine goodbye then takes their place.
    key, other = b"k" * 32, b"o" * 32
    run, nonce = "sealed", 0x0BAD_CAFE_1234_5678
    run_id = f"{run}/{nonce:016x}"
    rdv, root = tmp_path / "rdv", tmp_path / "files"
    rdv.mkdir()
    (rdv / "size%fake").write_text(sealed_entry(key, "size/fake", f"1 nonce={nonce:016x}"))
    (rdv / "addr%fake%0").write_text(sealed_entry(key, "addr/fake/0", "tcp=127.0.0.1:1 host=elsewhere pid=1"))
    inbox = root / f"run-{run}" / "to-1"
    inbox.mkdir(parents=True)
    (root / f"run-{run}" / "alive-0").write_text("1\n")
    (inbox / "0-0.msg").write_bytes(sealed_file(key, run_id, 0, 1, 0, b"hello from a file", tag=7))
    (inbox / "0-1.msg").write_bytes(message_file(run_id, 0, 1, 1, b"forged", tag=7))
    env = clean_env(TETHER_TRANSPORTS="file", TETHER_FILE_DIR=str(root), TETHER_RUN_ID=run,
                    TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAMS="fake,real", TETHER_PROGRAM="real",
                    TETHER_KEY=key.decode())
    proc = subprocess.Popen([program("file_peer"), "receive"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        def await_file(path):
            deadline = time.monotonic() + 30
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        await_file(inbox / "0-1.msg.rejected-0")
        publish(inbox / "0-1.msg", sealed_file(other, run_id, 0, 1, 1, b"other key", tag=7))
        await_file(inbox / "0-1.msg.rejected-1")
        publish(inbox / "0-1.msg", sealed_file(key, run_id, 0, 1, 1, b"", kind=8))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "received 17 bytes tag 7: hello from a file" in out, out + err
    assert "forged" not in out and "other key" not in out, out
    refused = [l for l in err.splitlines() if "TETHER_ERR_FILE" in l]
    assert len(refused) == 2, err
    assert "not sealed with the run's key" in refused[0], refused
    assert "MAC does not check" in refused[1], refused
    assert sorted(p.name for p in inbox.iterdir()) == ["0-1.msg.rejected-0", "0-1.msg.rejected-1"]
    mode = (root / f"run-{run}" / "to-0" / "1-0.msg").stat().st_mode & 0o777
    assert mode == 0o600, oct(mode)
