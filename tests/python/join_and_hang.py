"""Joins, says so, and waits to be killed: a run that crashes after its
start-up and leaves its rendezvous entries behind (tests/
test_reused_rendezvous.py)."""

import time

import tether

tether.init()
print("joined", flush=True)
time.sleep(120)
