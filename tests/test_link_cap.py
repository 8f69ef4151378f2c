"""TETHER_MAX_LINKS: TCP connections over the cap are retired and
dialled again in the middle of a stream, and shared-memory rings give
their pages back, without losing or reordering a message; a kernel's
peers keep theirs (`tests/python/retire_stream.py`
checks every message and the links left after a kernel)."""

import re
import sys

import pytest

from conftest import ROOT, clean_env, tether_run

STREAM = str(ROOT / "tests" / "python" / "retire_stream.py")


@pytest.mark.parametrize("layout", ["one program", "one program over shm", "two programs on two rails"])
def test_a_stream_between_six_processes_under_a_cap_of_one_loses_nothing(python_package, layout):
    if layout.startswith("one program"):
        args = ["--name", "s", "-n", "6", sys.executable, STREAM, "150"]
        transport = "shm" if layout.endswith("shm") else "tcp"
        env = clean_env(TETHER_TRANSPORTS=transport, TETHER_MAX_LINKS="1")
    else:
        args = ["--name", "a", "-n", "3", sys.executable, STREAM, "150", ":",
                "--name", "b", "-n", "3", sys.executable, STREAM, "150"]
        env = clean_env(TETHER_TRANSPORTS="tcp", TETHER_MAX_LINKS="2", TETHER_RAILS="2")
    proc = tether_run(args, env=env)
    text = proc.stdout + proc.stderr
    done = re.findall(r"ok retire (\d+) (\d+) (\d+) mailbox (\d+) (\d+)", proc.stdout)
    assert len(done) == 6, text
    # Every process retired links: the stream crossed many retires.
    assert all(int(retires) > 0 for _, retires, *_ in done), done
    # Over shared memory, small frames to peers without a ring went
    # through their mailbox, and rings opened and closed around them.
    mailbox = [(int(sent), int(read)) for *_, sent, read in done]
    if layout.endswith("shm"):
        assert all(sent > 0 and read > 0 for sent, read in mailbox), done
    else:
        assert mailbox == [(0, 0)] * 6, done
    # A retire is routine: it warns of nothing.
    assert " WARN " not in text and " ERROR " not in text, text


def test_without_a_cap_nothing_is_retired(python_package):
    proc = tether_run(["--name", "s", "-n", "3", sys.executable, STREAM, "40"],
                      env=clean_env(TETHER_TRANSPORTS="tcp"))
    done = re.findall(r"ok retire (\d+) (\d+) (\d+) mailbox (\d+) (\d+)", proc.stdout)
    assert len(done) == 3 and all(retires == "0" for _, retires, *_ in done), proc.stdout + proc.stderr


def test_more_writers_than_cores_share_one_mailbox_and_lose_nothing(python_package):
    """Eleven processes on this two-core machine stream small messages
    to one: they take its mailbox in turn and wait for room in it; every
    message arrives once, intact, in its sender's order."""
    script = str(ROOT / "tests" / "python" / "mailbox_fan_in.py")
    proc = tether_run(["--name", "f", "-n", "12", sys.executable, script, "400"],
                      env=clean_env(TETHER_TRANSPORTS="shm", TETHER_MAX_LINKS="1"))
    text = proc.stdout + proc.stderr
    done = {int(rank): (int(sent), int(read))
            for rank, sent, read in re.findall(r"ok fan-in (\d+) (\d+) (\d+)", proc.stdout)}
    assert sorted(done) == list(range(12)), text
    # Each sender's 400 messages went through the mailbox (and the
    # barrier's few frames), and rank 0 read all of them.
    assert all(done[rank][0] >= 400 for rank in range(1, 12)), done
    assert done[0][1] >= 11 * 400, done
    assert " WARN " not in text and " ERROR " not in text, text
