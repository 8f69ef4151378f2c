"""The rail test bed (tests/railbed.py) does what it is for.

These tests check the bed itself, not Tether: that a rail delivers about
its configured rate to one plain TCP stream, that two rails give a raw
striped transfer (benches/rails/raw_stream.c) clearly more than one, and
that the bed cleans up after itself. Asserting on rates is what a traffic
shaper's test must do; the margins are wide because the machine is shared
(2 cores here): a rail at 200 Mbit/s needs a few percent of one core, so
contention can slow the raw stream somewhat but not to half, and a rate
above the line rate would mean tbf is not shaping at all. Each measurement
takes about 1 s; a failed one is retried once, and the best of the two
counts, since load can only make a run slower, never faster.

Skips, with the reason railbed.available() gives, where namespaces, veth,
tbf, root or iproute2 are missing, and where there is no C compiler.
"""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import railbed  # noqa: E402

RATE = 200  # Mbit/s per rail: far from CPU-bound on 2 shared cores
# One TCP stream's goodput through tbf is 1448/1514 = 0.956 of the rate
# (TCP/IP/Ethernet headers count against it); 0.8 leaves room for a busy
# machine, 1.05 catches a shaper that does not shape.
LOW, HIGH = 0.8, 1.05


@pytest.fixture(scope="module")
def bed_ok():
    """Skips, saying why, where no bed can be made."""
    ok, why = railbed.available()
    if not ok:
        pytest.skip(why)


@pytest.fixture(scope="module")
def raw_stream_exe(bed_ok, tmp_path_factory):
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler (cc) to build benches/rails/raw_stream.c")
    return railbed.build_raw_stream(tmp_path_factory.mktemp("railbed"))


def best_of_two(run, good):
    """run() once more if the first result is not good(); the faster counts."""
    first = run()
    if good(first):
        return first
    second = run()
    return max(first, second, key=lambda r: r["Mbit/s"])


def test_one_rail_gives_one_stream_its_line_rate(raw_stream_exe):
    with railbed.RailBed([RATE]) as bed:
        nbytes = 24 << 20  # about 1 s at 200 Mbit/s
        r = best_of_two(lambda: railbed.raw_stream(bed, nbytes, exe=raw_stream_exe),
                        lambda r: LOW * RATE <= r["Mbit/s"] <= HIGH * RATE)
        print(f"one rail at {RATE} Mbit/s: {r['Mbit/s']:.1f} Mbit/s")
        assert LOW * RATE <= r["Mbit/s"] <= HIGH * RATE, r
        # The bytes went over the rail (headers included: >= payload).
        assert bed.counters()[0]["a"]["tx_bytes"] >= nbytes


def test_two_rails_stripe_clearly_faster_than_one(raw_stream_exe):
    with railbed.RailBed([RATE, RATE]) as bed:
        def one():
            return railbed.raw_stream(bed, 24 << 20, rails=[1], exe=raw_stream_exe)

        def two():
            return railbed.raw_stream(bed, 48 << 20, exe=raw_stream_exe)

        single = best_of_two(one, lambda r: r["Mbit/s"] >= LOW * RATE)
        before = bed.counters()
        striped = best_of_two(two, lambda r: r["Mbit/s"] >= 1.5 * single["Mbit/s"])
        after = bed.counters()
        ratio = striped["Mbit/s"] / single["Mbit/s"]
        print(f"one rail {single['Mbit/s']:.1f}, two rails {striped['Mbit/s']:.1f} Mbit/s "
              f"({ratio:.2f}x), shares {striped['shares']}")
        # Measured here: 1.97x to 2.00x. 1.5x leaves room for load; the
        # upper bound says the second rail's limit is applied too.
        assert ratio > 1.5, (single, striped)
        assert striped["Mbit/s"] <= HIGH * 2 * RATE, striped
        # Both rails carried about half of the data.
        sent = [after[i]["a"]["tx_bytes"] - before[i]["a"]["tx_bytes"] for i in range(2)]
        assert min(sent) > 0.35 * sum(sent), sent


def test_unequal_rails_least_used_follows_the_rates(raw_stream_exe):
    # 200 + 100 Mbit/s: round_robin gives each rail half the chunks, so it
    # is bounded by twice the slow rail (200); least_used follows the real
    # rates (up to 300). The study's stripe.py: 1.01x and 1.44x one fast rail.
    with railbed.RailBed([RATE, RATE // 2]) as bed:
        nbytes = 36 << 20
        rr = railbed.raw_stream(bed, nbytes, policy="round_robin", exe=raw_stream_exe)
        lu = best_of_two(
            lambda: railbed.raw_stream(bed, nbytes, policy="least_used", exe=raw_stream_exe),
            lambda r: r["Mbit/s"] > 1.2 * RATE)
        print(f"{RATE}+{RATE // 2} Mbit/s: round_robin {rr['Mbit/s']:.1f} "
              f"least_used {lu['Mbit/s']:.1f} Mbit/s, shares {lu['shares']}")
        assert rr["Mbit/s"] <= HIGH * RATE, rr
        assert lu["Mbit/s"] > 1.2 * RATE, lu
        assert lu["shares"][0] > 0.55, lu


def test_set_rate_and_set_link(raw_stream_exe):
    with railbed.RailBed([RATE]) as bed:
        bed.set_rate(1, 50)
        r = railbed.raw_stream(bed, 6 << 20, exe=raw_stream_exe)
        assert r["Mbit/s"] <= HIGH * 50, r
        bed.set_link(1, up=False)
        ping = bed.run("a", [sys.executable, "-c", _CONNECT, bed.addr("b", 1)],
                       timeout=10, check=False)
        assert ping.returncode != 0, "a connection over a rail that is down"
        bed.set_link(1, up=True)


# Connects to port 9 of the address given (nothing listens: refused means
# the path works; a timeout means packets are dropped).
_CONNECT = """
import socket, sys
s = socket.socket()
s.settimeout(1.0)
try:
    s.connect((sys.argv[1], 9))
except ConnectionRefusedError:
    sys.exit(0)
except OSError:
    sys.exit(1)
"""


def test_run_inside_each_side_sees_its_addresses(bed_ok):
    with railbed.RailBed([RATE, RATE]) as bed:
        for side in ("a", "b"):
            out = bed.run(side, ["ip", "-o", "-4", "addr", "show"], timeout=10).stdout
            for addr in bed.addrs(side):
                assert f"{addr}/24" in out
            assert "127.0.0.1/8" in out  # lo is up
        ok = bed.run("a", [sys.executable, "-c", _CONNECT, bed.addr("b", 2)], timeout=10,
                     check=False)
        assert ok.returncode == 0, ok.stderr
        env = bed.env()
        assert env["RAILBED_B_ADDRS"] == "10.1.0.2,10.2.0.2"


def _namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          timeout=10).stdout


def test_bed_goes_away_after_with_block_and_on_sigterm(bed_ok):
    with railbed.RailBed([RATE]) as bed:
        names = list(bed.ns.values())
        sleeper = bed.popen("b", ["sleep", "60"])
        assert all(n in _namespaces() for n in names)
    assert not any(n in _namespaces() for n in names)
    assert sleeper.poll() is not None

    # A program holding a bed, killed with SIGTERM: its handler removes it.
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); import railbed; "
              "b = railbed.RailBed([100]).up(); print(b.ns['a'], flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", script, str(Path(railbed.__file__).parent)],
                         stdout=subprocess.PIPE, text=True)
    try:
        ns = p.stdout.readline().strip()
        assert ns in _namespaces()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == -signal.SIGTERM
        assert ns not in _namespaces()
    finally:
        p.kill()
        p.wait()


def test_leftovers_of_a_killed_program_are_removed(bed_ok):
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); import railbed; "
              "b = railbed.RailBed([100]).up(); print(b.id, flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", script, str(Path(railbed.__file__).parent)],
                         stdout=subprocess.PIPE, text=True)
    bed_id = p.stdout.readline().strip()
    p.kill()  # SIGKILL: no handler runs, the bed stays behind
    p.wait(timeout=10)
    assert bed_id in railbed.list_beds()
    assert bed_id in railbed.cleanup_leftovers()
    assert bed_id not in railbed.list_beds()
