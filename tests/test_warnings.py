"""Warnings that repeat one cause are counted, not repeated (issue 24: a
universe mismatch printed about 600 WARN lines per process per 30 s).
The first is shown, the others are counted and reported once at
finalize."""

import socket
import subprocess
import sys
import time

from conftest import ROOT, clean_env


def test_a_flood_of_one_warning_is_shown_once_with_its_count(built, python_package, tmp_path):
    rdv, gate = tmp_path / "rdv", tmp_path / "gate"
    script = str(ROOT / "tests" / "python" / "idle_until_gate.py")
    env = clean_env(TETHER_RENDEZVOUS=str(rdv), TETHER_PROGRAM="solo", TETHER_HANDSHAKE_TIMEOUT=1,
                    TETHER_TRANSPORTS="tcp")
    proc = subprocess.Popen([sys.executable, script, str(gate)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    sockets = []
    try:
        assert proc.stdout.readline().strip() == "joined"
        entry = (rdv / "addr%solo%0").read_text()
        host, port = next(f[4:] for f in entry.split() if f.startswith("tcp=")).rsplit(":", 1)
        # 50 connections that never say hello: each is dropped after the
        # handshake timeout, with the same warning.
        for _ in range(50):
            sockets.append(socket.create_connection((host, int(port)), timeout=10))
        time.sleep(3)
        gate.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        for s in sockets:
            s.close()
        proc.kill()
    assert "finalized" in out, out + err
    dropped = [line for line in err.splitlines() if "no handshake within 1 s" in line]
    assert len(dropped) == 2, err
    assert "this warning came 49 more times (not shown): dropping connection with" in dropped[-1], err
