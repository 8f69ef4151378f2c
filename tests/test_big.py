"""A message of 3 GiB (64-bit counts, rendezvous straight into the posted
buffer) between two processes."""

from conftest import tether_run


def test_three_gib_message(built, program):
    prog = program("big_message")
    proc = tether_run(["--name", "a", "-n", "1", prog, ":", "--name", "b", "-n", "1", prog], timeout=300)
    assert "received 3221225472 bytes intact" in proc.stdout
