"""One-sided operations (DESIGN 3.7) between two programs under `tether
run`: five processes, alpha of 2 and beta of 3, over every transport
set-up. Each scenario of tests/c/rma_suite.c checks its results byte by
byte or against a serial model, and prints "ok SCENARIO" from rank 0."""

import pytest

from conftest import TRANSPORTS, tether_run, universe
from test_file import universe as file_universe, SETUPS as FILE_SETUPS

SCENARIOS = ["putget", "atomics", "range", "passive", "computing", "lost"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rma_scenario(built, program, scenario, transport):
    args, env = universe(program("rma_suite"), scenario, transport=transport)
    proc = tether_run(args, env=env)
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("setup", FILE_SETUPS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rma_scenario_through_files(built, program, scenario, setup, tmp_path):
    args, env = file_universe(program("rma_suite"), scenario, setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    proc = tether_run(args, env=env)
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr


AM_SCENARIOS = ["many", "reply", "deadlock", "unregistered"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("scenario", AM_SCENARIOS)
def test_active_messages(built, program, scenario, transport):
    args, env = universe(program("am_suite"), scenario, transport=transport)
    proc = tether_run(args, env=env)
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr
    if scenario == "unregistered":
        # Once per id; a repeat of the same cause for another id (4 here)
        # is counted by the log's aggregation, which may name the first.
        assert proc.stderr.count("WARN an active message for id 999") == 1, proc.stderr


@pytest.mark.parametrize("setup", FILE_SETUPS)
@pytest.mark.parametrize("scenario", AM_SCENARIOS)
def test_active_messages_through_files(built, program, scenario, setup, tmp_path):
    args, env = file_universe(program("am_suite"), scenario, setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    proc = tether_run(args, env=env)
    assert f"ok {scenario}" in proc.stdout, proc.stdout + proc.stderr
