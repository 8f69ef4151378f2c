"""Active messages from Python (tether.am_register, Comm.am_send,
tether.progress; DESIGN 3.7 and 3.11) through `tether run`, over every
transport set-up:

- the scenarios of tests/python/am_suite.py between two Python programs
  (alpha of 2, beta of 3): request/response with answers sent from inside
  handlers, blocking calls refused there with ArgError; 0 B to 1 MiB
  payloads from every rank to every rank, each delivered exactly once;
  the MVAPICH2-X deadlock scenario; exceptions in handlers reported and
  survived, bad arguments and the progress thread refused;
- a C program (tests/c/am_py_peer.c) and a Python one
  (tests/python/am_c_peer.py) sending each other requests of 1 MiB, each
  answering from inside its handler (C sender, Python handler and the
  reverse);
- the request/response and many-message scenarios over the file and hybrid
  transports."""

import re
import sys

import pytest

from conftest import ROOT, TRANSPORTS, clean_env, tether_run, universe

SUITE = ROOT / "tests" / "python" / "am_suite.py"
SCENARIOS = ["reply", "many", "deadlock", "exceptions"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_python_active_messages(python_package, scenario, transport):
    args, env = universe(sys.executable, str(SUITE), scenario, transport=transport)
    proc = tether_run(args, env=env, timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5, proc.stdout + proc.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_c_and_python_active_messages_both_ways(python_package, program, transport):
    peer = program("am_py_peer")
    script = str(ROOT / "tests" / "python" / "am_c_peer.py")
    c_side, py_side = [peer], [sys.executable, script]
    if transport == "mixed":
        c_side = ["env", "TETHER_HOST_ID=host-a", *c_side]
        py_side = ["env", "TETHER_HOST_ID=host-b", *py_side]
    env = clean_env(TETHER_TRANSPORTS={"tcp": "tcp", "shm": "shm", "mixed": "shm,tcp"}[transport])
    proc = tether_run(["--name", "csim", "-n", "2", *c_side, ":", "--name", "pymodel", "-n", "2", *py_side], env=env)
    assert proc.stdout.count("ok c-python am") == 4, proc.stdout + proc.stderr


def test_unraisable_exception_is_printed(python_package, tmp_path):
    # Without a hook of its own, a handler's exception is printed on stderr
    # with its traceback (sys.unraisablehook's default) and the program
    # carries on to its end.
    script = tmp_path / "raises.py"
    script.write_text(
        "import tether\n"
        "tether.init()\n"
        "seen = []\n"
        "def handler(source, header, payload):\n"
        "    seen.append(header)\n"
        "    raise RuntimeError('handler failed on ' + header.decode())\n"
        "tether.am_register(3, handler)\n"
        "tether.UNIVERSE.Barrier()\n"
        "tether.UNIVERSE.am_send(0, 3, b'purpose').wait()\n"
        "while not seen:\n"
        "    tether.progress()\n"
        "print('carried on', flush=True)\n"
    )
    proc = tether_run(["--name", "solo", "-n", "1", sys.executable, str(script)])
    assert "carried on" in proc.stdout, proc.stdout + proc.stderr
    assert "RuntimeError: handler failed on purpose" in proc.stderr, proc.stderr
    assert "Traceback" in proc.stderr, proc.stderr


def test_active_message_example_of_the_docs(python_package, tmp_path):
    # The active-message program of docs/python.md prints what the docs
    # show (in some order) under the line they give.
    doc = (ROOT / "docs" / "python.md").read_text()
    section = doc[doc.index("### Active messages"):]
    source = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    script = tmp_path / "rpc.py"
    script.write_text(source)
    shown = re.search(r"\$ tether run (.*?)\n((?:\[.*\n)+)", section)
    args = shown.group(1).replace("python3", sys.executable).replace("rpc.py", str(script)).split()
    proc = tether_run(args)
    assert sorted(proc.stdout.splitlines()) == sorted(shown.group(2).splitlines()), proc.stdout + proc.stderr


@pytest.mark.parametrize("setup", ["file", "hybrid"])
@pytest.mark.parametrize("scenario", ["reply", "many"])
def test_python_active_messages_through_files(python_package, scenario, setup, tmp_path):
    from test_file import universe as file_universe

    args, env = file_universe(sys.executable, str(SUITE), scenario, setup=setup)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    proc = tether_run(args, env=env, timeout=180)
    assert proc.stdout.count(f"ok {scenario}") == 5, proc.stdout + proc.stderr
