"""The links a process holds and their memory, as `tether_stats_*`,
`tether.stats()` and TETHER_STATS=1 report them (`links`,
`<transport>.links`, `link_*_bytes`): checked against what the kernel
says of the same process at the same moment (its TCP sockets and their
queues in `ss -tmp`; the rings' sizes)."""

import re
import shutil
import subprocess
import time

import pytest

from conftest import clean_env

RING = 256 << 10  # TETHER_SHM_RING_BYTES's default


def start(prog, tmp_path, transports, n=3):
    gate = tmp_path / "go"
    procs = []
    for rank in range(n):
        env = clean_env(TETHER_RENDEZVOUS=tmp_path / "rdv", TETHER_PROGRAM="p", TETHER_PROGRAMS="p",
                        TETHER_RANK=rank, TETHER_SIZE=n, TETHER_TRANSPORTS=transports, TEST_GATE=gate)
        procs.append(subprocess.Popen([prog], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    figures = []
    for p in procs:
        seen = {}
        deadline = time.monotonic() + 60
        for line in p.stdout:
            if line.strip() == "ready":
                break
            name, value = line.split()
            seen[name] = int(value)
            assert time.monotonic() < deadline
        figures.append(seen)
    return procs, figures, gate


def finish(procs, gate):
    gate.write_text("go")
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, out + err


def kernel_view(pid):
    """The established TCP sockets of `pid` and their r + w + f (ss -m)."""
    out = subprocess.run(["ss", "-tnmp", "state", "established"], capture_output=True, text=True, check=True).stdout
    sockets, held = 0, 0
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if f"pid={pid}," not in line:
            continue
        sockets += 1
        mem = next((l for l in lines[i:i + 3] if "skmem:(" in l), "")
        fields = dict(re.findall(r"([a-z]+)(\d+)", mem.split("skmem:(")[1].split(")")[0])) if mem else {}
        held += int(fields.get("r", 0)) + int(fields.get("w", 0)) + int(fields.get("f", 0))
    return sockets, held


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is missing")
def test_tcp_links_and_their_kernel_memory_agree_with_ss(built, program, tmp_path):
    procs, figures, gate = start(program("link_stats"), tmp_path, "tcp")
    try:
        for seen in figures:
            assert seen["links"] == 2 and seen["tcp.links"] == 2, seen
            assert seen["shm.links"] == -1 and seen["link_ring_bytes"] == 0, seen
            sockets, held = kernel_view(seen["pid"])
            # The process's TCP connections are its links (its listener
            # and heartbeat socket are not connections).
            assert sockets == seen["tcp.links"], (sockets, seen)
            # Idle, both are the kernel's own figures for the same sockets;
            # a heartbeat may come and go between the two readings.
            assert abs(held - seen["link_kernel_bytes"]) <= 16 << 10, (held, seen)
            # Between frames the links hold no read buffer: they share
            # the transport's (one suffices for reads that end on a
            # frame's end, and a few are kept), counted apart.
            assert seen["link_user_bytes"] < 4 * 4096, seen
            assert 0 < seen["tcp_shared_bytes"] <= 2 * (256 << 10), seen
            # The peak, read last, is at least what the links held when
            # read just before (the socket queues aside, which move).
            assert seen["link_bytes_peak"] >= seen["link_user_bytes"], seen
    finally:
        finish(procs, gate)


def test_shm_links_count_both_rings_of_each_peer(built, program, tmp_path):
    procs, figures, gate = start(program("link_stats"), tmp_path, "shm")
    try:
        for seen in figures:
            assert seen["links"] == 2 and seen["shm.links"] == 2 and seen["tcp.links"] == -1, seen
            # Each link: the ring this process writes in the peer's segment
            # and the one the peer writes in this process's segment.
            assert seen["link_ring_bytes"] == 2 * 2 * RING, seen
            # Written rings have their first pages in memory; nothing
            # beyond the rings is counted.
            assert 0 < seen["link_ring_resident_bytes"] <= seen["link_ring_bytes"], seen
            assert seen["link_kernel_bytes"] == 0, seen
            assert seen["link_bytes_peak"] >= seen["link_user_bytes"] + seen["link_ring_resident_bytes"], seen
    finally:
        finish(procs, gate)
