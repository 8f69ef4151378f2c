"""One-sided operations from Python (tether.Win, DESIGN 3.7 and 3.11)
through `tether run`, over every transport set-up (and files, hybrid):

- the scenarios of tests/python/rma_suite.py between two Python programs
  (alpha of 2, beta of 3): put/get byte-exact after flush and fence,
  accumulate on int64 and float64, a fetch_and_op counter with distinct
  values, a compare_and_swap lock, out-of-range accesses raising
  RmaRangeError with the target untouched, bad buffers refused;
- a C program (tests/c/rma_py_peer.c) and a Python one
  (tests/python/rma_c_peer.py) as origins and targets of each other."""

import sys

import pytest

from conftest import ROOT, TRANSPORTS, clean_env, tether_run, universe
from test_file import SETUPS as FILE_SETUPS, universe as file_universe

SUITE = ROOT / "tests" / "python" / "rma_suite.py"
SCENARIOS = ["putget", "accumulate", "atomics", "range"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_python_rma_scenario(python_package, scenario, transport):
    args, env = universe(sys.executable, str(SUITE), scenario, transport=transport)
    proc = tether_run(args, env=env, timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5, proc.stdout + proc.stderr


@pytest.mark.parametrize("setup", FILE_SETUPS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_python_rma_scenario_through_files(python_package, scenario, setup, tmp_path):
    args, env = file_universe(sys.executable, str(SUITE), scenario, setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    proc = tether_run(args, env=env, timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5, proc.stdout + proc.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_c_and_python_windows_both_ways(python_package, program, transport):
    peer = program("rma_py_peer")
    script = str(ROOT / "tests" / "python" / "rma_c_peer.py")
    c_side, py_side = [peer], [sys.executable, script]
    if transport == "mixed":
        c_side = ["env", "TETHER_HOST_ID=host-a", *c_side]
        py_side = ["env", "TETHER_HOST_ID=host-b", *py_side]
    env = clean_env(TETHER_TRANSPORTS={"tcp": "tcp", "shm": "shm", "mixed": "shm,tcp"}[transport])
    proc = tether_run(["--name", "csim", "-n", "2", *c_side, ":", "--name", "pymodel", "-n", "2", *py_side], env=env)
    assert proc.stdout.count("ok c-python rma") == 4, proc.stdout + proc.stderr


def test_one_sided_example_of_the_docs(python_package, tmp_path):
    # The one-sided program of docs/python.md prints what the docs show
    # (in some order) under the line they give.
    import re

    doc = (ROOT / "docs" / "python.md").read_text()
    section = doc[doc.index("### One-sided operations"):]
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    script = tmp_path / "onesided.py"
    script.write_text(source)
    shown = re.search(r"\$ tether run (.*?)\n((?:\[.*\n)+)", section)
    args = shown.group(1).replace("python3", sys.executable).replace("onesided.py", str(script)).split()
    proc = tether_run(args)
    assert sorted(proc.stdout.splitlines()) == sorted(shown.group(2).splitlines()), proc.stdout + proc.stderr
