"""Authenticated peers: with TETHER_KEY or TETHER_KEY_FILE every link
proves the run's key both ways before any payload is delivered; a wrong
key, no key, a replayed or forged handshake is refused and logged with the
peer's address, and the refusing process stays healthy."""

import os
import socket
import struct
import subprocess
import time

import pytest

from conftest import TETHER, clean_env
from test_wire_robustness import header, read_address

KEY = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
OTHER_KEY = "ffeeddccbbaa99887766554433221100"


def launch(prog, rdv, keys, transports="tcp", extra=None):
    procs = []
    for name, key in zip(("alpha", "beta"), keys):
        env = clean_env(TETHER_RENDEZVOUS=rdv, TETHER_PROGRAM=name, TETHER_PROGRAMS="alpha,beta",
                        TETHER_TRANSPORTS=transports, TETHER_CONNECT_TIMEOUT=10, **(extra or {}).get(name, {}))
        env.update(key)
        procs.append(subprocess.Popen([prog, "pairs"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs, timeout=60):
    try:
        return [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


@pytest.mark.parametrize("transports", ["tcp", "shm", "file", "hybrid"])
def test_processes_with_the_same_key_exchange(built, program, tmp_path, transports):
    procs = launch(program("p2p_suite"), tmp_path / "rdv", [{"TETHER_KEY": KEY}] * 2, transports)
    for p, (out, err) in zip(procs, finish(procs)):
        assert p.returncode == 0, out + err
        assert "ok pairs" in out
        assert KEY not in out + err


def test_a_shared_key_file_authenticates_and_an_open_one_is_refused(built, program, tmp_path):
    key_file = tmp_path / "run.key"
    made = subprocess.run([str(TETHER), "key", "new", str(key_file)], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    again = subprocess.run([str(TETHER), "key", "new", str(key_file)], capture_output=True, text=True, timeout=30)
    assert again.returncode != 0 and "exists already" in again.stderr, again.stderr
    procs = launch(program("p2p_suite"), tmp_path / "rdv", [{"TETHER_KEY_FILE": key_file}] * 2)
    for p, (out, err) in zip(procs, finish(procs)):
        assert p.returncode == 0, out + err
    key_file.chmod(0o644)
    procs = launch(program("p2p_suite"), tmp_path / "rdv2", [{"TETHER_KEY_FILE": key_file}] * 2)
    for p, (out, err) in zip(procs, finish(procs)):
        assert p.returncode != 0
        assert "TETHER_ERR_AUTH" in out + err, out + err
        assert f"key file {key_file} has mode 0644" in out + err, out + err
        assert key_file.read_text().strip() not in out + err


@pytest.mark.parametrize("keys, says", [
    # Each finds the other's rendezvous entries unsealed by its key.
    ([{"TETHER_KEY": KEY}, {"TETHER_KEY": OTHER_KEY}], "not written with this process's key"),
    ([{"TETHER_KEY": KEY}, {}], "TETHER_KEY_FILE"),
], ids=["wrong-key", "no-key"])
def test_a_wrong_or_missing_key_fails_both_sides_with_an_auth_error(built, program, tmp_path, keys, says):
    procs = launch(program("p2p_suite"), tmp_path / "rdv", keys)
    started = time.monotonic()
    outs = finish(procs)
    assert time.monotonic() - started < 30, "an authentication failure is not retried until a timeout"
    # Each side fails; at least the one that checks the other first fails
    # with TETHER_ERR_AUTH (the other may find it gone by then).
    for p, (out, err) in zip(procs, outs):
        assert p.returncode != 0, out + err
        assert KEY not in out + err and OTHER_KEY not in out + err
    told = [out + err for out, err in outs if "TETHER_ERR_AUTH" in out + err]
    assert told and all(says in text for text in told), outs


def fnv_universe_id(sizes):
    value = 0xcbf29ce484222325
    for name, size in sorted(sizes):
        for byte in name.encode() + struct.pack("<I", size) + b"\xff":
            value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def hello(program, rank, universe_rank, caps=0):
    name = program.encode()
    payload = struct.pack("<QIQIH", fnv_universe_id([("alpha", 1), ("beta", 1)]), universe_rank, caps, rank, len(name)) + name
    return payload


def frame(kind, seq, payload):
    return header(kind=kind, seq=seq, length=len(payload)) + payload


def read_frame(sock):
    head = b""
    while len(head) < 56:
        chunk = sock.recv(56 - len(head))
        if not chunk:
            return None, b""
        head += chunk
    kind, length = head[6], struct.unpack("<Q", head[16:24])[0]
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return kind, body


def test_forged_handshakes_are_refused_logged_and_the_real_peer_still_joins(built, program, tmp_path):
    rdv = tmp_path / "rdv"
    gate = tmp_path / "go"
    procs = launch(program("p2p_suite"), rdv, [{"TETHER_KEY": KEY}] * 2,
                   extra={"beta": {"TEST_GATE": gate}})
    try:
        addr = read_address(rdv, "alpha", 0)
        # Claims beta without a key: refused before anything is delivered.
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(frame(1, 0, hello("beta", 0, 1)))
            kind, reason = read_frame(s)
            assert kind == 3 and b"has no key" in reason, (kind, reason)
        # Claims beta with a key it does not have: challenged, then refused.
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(frame(1, 0, hello("beta", 0, 1, caps=1) + os.urandom(32)))
            kind, challenge = read_frame(s)
            assert kind == 13 and len(challenge) > 64, kind
            s.sendall(frame(14, 1, os.urandom(32)))
            kind, reason = read_frame(s)
            assert kind == 3 and b"authentication failed" in reason, (kind, reason)
        gate.write_text("go")
        outs = finish(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        assert "ok pairs" in out
    alpha_err = outs[0][1]
    assert "refusing connection from 127.0.0.1:" in alpha_err, alpha_err
    assert "authentication failed" in alpha_err and "has no key" in alpha_err, alpha_err


def test_tether_run_gives_every_run_a_fresh_key_and_never_shows_it(built, tmp_path):
    def key_of_a_run():
        run = subprocess.run([str(TETHER), "run", "--name", "a", "-n", "1", "env"], capture_output=True,
                             text=True, timeout=60, env=clean_env())
        assert run.returncode == 0, run.stderr
        keys = [line.split("=", 1)[1] for line in run.stdout.splitlines() if "TETHER_KEY=" in line]
        assert len(keys) == 1 and len(keys[0]) == 64, run.stdout
        return keys[0]
    assert key_of_a_run() != key_of_a_run()
    info = subprocess.run([str(TETHER), "info"], capture_output=True, text=True, timeout=60,
                          env=clean_env(TETHER_KEY=KEY))
    assert "TETHER_KEY = (set, not shown)" in info.stdout, info.stdout
    assert KEY not in info.stdout + info.stderr
