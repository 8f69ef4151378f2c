"""Rails (TETHER_RAILS): several TCP connections per peer, large rendezvous
data striped over them in chunks that land in place, MPI order kept on each
peer's home rail. The point-to-point and collective suites run over 2 and 4
rails under both policies, with a small threshold and chunk so that most
rendezvous messages are striped into many chunks; a 3 GiB message crosses
4 rails; on the rail test bed (two network namespaces joined by two
rate-limited veth pairs, tests/railbed.py) the bytes of a striped transfer
cross both NICs."""

import os
import subprocess
import sys

import pytest

from conftest import clean_env, tether_run, universe

sys.path.insert(0, os.path.dirname(__file__))
import railbed  # noqa: E402

# (rails, policy): the long suites run two of the four set-ups (two rails
# the cheap way, four the balancing way); the point-to-point scenarios,
# quick, run all four.
SETUPS = [("2", "round_robin"), ("4", "least_used")]
IDS = ["2-round_robin", "4-least_used"]
ALL_SETUPS = SETUPS + [("2", "least_used"), ("4", "round_robin")]
ALL_IDS = IDS + ["2-least_used", "4-round_robin"]


def rails_env(env, rails, policy):
    env.update(TETHER_TRANSPORTS="tcp", TETHER_RAILS=rails, TETHER_RAIL_POLICY=policy,
               TETHER_RAIL_THRESHOLD="65536", TETHER_RAIL_CHUNK="16384")
    return env


@pytest.mark.parametrize("rails,policy", ALL_SETUPS, ids=ALL_IDS)
@pytest.mark.parametrize("scenario", ["pairs", "wildcards", "truncation", "probe", "cancel", "odd", "blocking_order"])
def test_p2p_scenarios_over_rails(built, program, scenario, rails, policy):
    args, env = universe(program("p2p_suite"), scenario)
    proc = tether_run(args, env=rails_env(env, rails, policy))
    assert proc.stdout.count(f"ok {scenario}") == 5


@pytest.mark.parametrize("rails,policy", SETUPS, ids=IDS)
def test_ten_thousand_mixed_messages_keep_order_and_content_over_rails(built, program, rails, policy):
    # 5 processes in a ring, 2000 messages each of 0 B to 8 MiB, 4 tags:
    # every rendezvous message from 64 KiB on goes in 16 KiB chunks.
    args, env = universe(program("p2p_suite"), "stream", "2000")
    proc = tether_run(args, env=rails_env(env, rails, policy), timeout=300)
    assert proc.stdout.count("ok stream") == 5


@pytest.mark.parametrize("rails,policy", SETUPS, ids=IDS)
@pytest.mark.parametrize("scenario", ["reductions", "movement"])
def test_collectives_over_rails(built, program, scenario, rails, policy):
    suite = program("coll_suite", ["-lm"])
    args = ["--name", "a", "-n", "1", suite, scenario, ":", "--name", "b", "-n", "2", suite, scenario,
            ":", "--name", "c", "-n", "4", suite, scenario]
    proc = tether_run(args, env=rails_env(clean_env(), rails, policy), timeout=400)
    assert proc.stdout.count(f"ok {scenario}") == 7


def test_three_gib_message_over_four_rails(built, program):
    prog = program("big_message")
    env = clean_env(TETHER_TRANSPORTS="tcp", TETHER_RAILS="4", TETHER_RAIL_POLICY="least_used")
    proc = tether_run(["--name", "a", "-n", "1", prog, ":", "--name", "b", "-n", "1", prog],
                      env=env, timeout=300)
    assert "received 3221225472 bytes intact" in proc.stdout


def test_each_rail_is_a_connection_in_the_link_stats(built, program):
    # TETHER_STATS=1 prints each process's links at finalize: over 3 rails
    # a striped transfer leaves 3 TCP links per peer.
    args, env = universe(program("p2p_suite"), "stream", "50")
    env = rails_env(env, "3", "round_robin")
    env["TETHER_STATS"] = "1"
    proc = tether_run(args, env=env, timeout=120)
    assert proc.stdout.count("ok stream") == 5
    out = proc.stdout + proc.stderr
    counts = [int(line.split()[-1]) for line in out.splitlines()
              if line.split()[-2:-1] and line.split()[-2].startswith("peer.") and line.split()[-2].endswith(".tcp.links")]
    assert counts and max(counts) == 3, out[-3000:]


def test_a_bad_rail_count_fails_init_naming_the_setting(built, program):
    # (A RAILS hint is refused as a start-up setting, and RAIL_POLICY taken
    # as a hint: tests/python/p2p_suite.py's names scenario.)
    prog = program("init_check")
    proc = tether_run(["--name", "a", "-n", "1", prog], env=clean_env(TETHER_RAILS="17"), check=False)
    assert proc.returncode != 0
    assert "TETHER_RAILS" in proc.stderr and "17" in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def bed_ok():
    ok, why = railbed.available()
    if not ok:
        pytest.skip(why)


def test_striped_bytes_cross_both_rails_of_the_test_bed(built, program, bed_ok, tmp_path):
    """Two processes in two network namespaces joined by two 200 Mbit/s
    rails: 16 MiB messages each way over TETHER_RAILS=2 put a large share
    of their bytes on each rail (the interfaces' counters say so) and
    arrive intact (file_peer checks every byte)."""
    prog = program("file_peer")
    with railbed.RailBed(rates=(200, 200)) as bed:
        before = bed.counters()
        procs = []
        for side, name in (("a", "left"), ("b", "right")):
            env = clean_env(TETHER_TRANSPORTS="tcp", TETHER_RAILS="2",
                            TETHER_TCP_INTERFACE=",".join(bed.addrs(side)),
                            TETHER_RENDEZVOUS=str(tmp_path / "rdv"),
                            TETHER_PROGRAMS="left,right", TETHER_PROGRAM=name)
            procs.append(bed.popen(side, [prog, "sizes", str(16 << 20)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for p in procs:
            out, err = p.communicate(timeout=90)
            assert p.returncode == 0 and "sizes 1 ok" in out, (out, err)
        after = bed.counters()
    moved = [after[r]["b"]["rx_bytes"] - before[r]["b"]["rx_bytes"] for r in range(2)]
    total = sum(moved)
    assert total > 16 << 20, moved
    for r, m in enumerate(moved):
        assert m > total * 0.3, f"rail {r + 1} carried {m} of {total} bytes"


def bed_pair(bed, prog, args, tmp_path, **settings):
    """`prog args` as program left (side a) and right (side b) of the bed,
    two rails, rendezvous in a directory both sides see."""
    procs = []
    for side, name in (("a", "left"), ("b", "right")):
        env = clean_env(TETHER_TRANSPORTS="tcp", TETHER_RAILS=str(bed.rails),
                        TETHER_TCP_INTERFACE=",".join(bed.addrs(side)),
                        TETHER_RENDEZVOUS=str(tmp_path / "rdv"),
                        TETHER_PROGRAMS="left,right", TETHER_PROGRAM=name, **settings)
        procs.append(bed.popen(side, [prog, *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def cut_rail_midway(bed, procs, rail, after=1.5):
    """Waits `after` seconds, then resets every connection of bed rail
    `rail` (1-based) from side a (`ss -K`: both ends see it end), and
    collects the two programs' (returncode, stdout, stderr)."""
    import time
    time.sleep(after)
    assert all(p.poll() is None for p in procs), "the transfer ended before the cut"
    bed.run("a", ["ss", "-K", "dst", bed.addr("b", rail)], timeout=10, check=False)
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        outs.append((p.returncode, out, err))
    return outs


def test_a_rail_cut_mid_transfer_is_taken_out_and_its_chunks_go_again(built, program, bed_ok, tmp_path):
    """128 MiB each way over two 100 Mbit/s rails (about 5 s); after 1.5 s
    every connection of the pair's second rail (not its home: universe
    ranks 0 and 1 have their home on rail (0 + 1) mod 2, the bed's rail
    2) is reset. Both sides take the rail out, the chunks it may have lost
    go again on the other, and every byte arrives (file_peer checks)."""
    prog = program("file_peer")
    with railbed.RailBed(rates=(100, 100)) as bed:
        procs = bed_pair(bed, prog, ["sizes", str(128 << 20)], tmp_path)
        outs = cut_rail_midway(bed, procs, rail=1)
    for rc, out, err in outs:
        assert rc == 0 and "sizes 1 ok" in out, (out, err[-3000:])
    logs = "".join(err for _, _, err in outs)
    assert "rail 0 to universe rank" in logs and "go again on the other rails" in logs, logs[-3000:]


def test_a_cut_home_rail_loses_the_peer_with_an_error_not_a_hang(built, program, bed_ok, tmp_path):
    """The home rail carries the pair's order: resetting it mid-transfer
    ends both programs with TETHER_ERR_PEER_LOST (file_peer prints the
    error class and exits 3)."""
    prog = program("file_peer")
    with railbed.RailBed(rates=(100, 100)) as bed:
        procs = bed_pair(bed, prog, ["sizes", str(128 << 20)], tmp_path)
        outs = cut_rail_midway(bed, procs, rail=2)
    for rc, out, err in outs:
        assert rc == 3 and "error TETHER_ERR_PEER_LOST" in out, (rc, out, err[-3000:])
