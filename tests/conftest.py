"""Shared fixtures of the multi-process test suite.

Every test builds its C programs against the freshly built library in
`build/` (made by `make build`, which the `built` fixture runs once), and
runs them as real processes over loopback, through `tether run` or
launched separately.
"""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
TETHER = BUILD / "bin" / "tether"
# The wire protocol version (crates/tether-proto/src/wire.rs, VERSION),
# for the tests that write frames themselves.
WIRE_VERSION = 2
LIB = BUILD / "lib"
INCLUDE = ROOT / "include"
C_SOURCES = Path(__file__).resolve().parent / "c"


@pytest.fixture(scope="session")
def built():
    """Builds the library and the `tether` command once per session."""
    subprocess.run(["make", "-s", "build"], cwd=ROOT, check=True)
    assert TETHER.exists() and (LIB / "libtether.so").exists()
    return BUILD


@pytest.fixture(scope="session")
def python_package(built):
    """Installs the package into this interpreter once per session (`make python`)."""
    subprocess.run(["make", "-s", "python", f"PYTHON={sys.executable}"], cwd=ROOT, check=True)


@pytest.fixture(scope="session")
def bindir(built, tmp_path_factory):
    return tmp_path_factory.mktemp("bin")


def compile_c(bindir, name, extra=()):
    """Compiles tests/c/<name>.c (plus tests/c/common.h) into bindir."""
    out = bindir / name
    if not out.exists():
        cmd = [
            "cc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11",
            "-I", str(INCLUDE), "-I", str(C_SOURCES),
            str(C_SOURCES / f"{name}.c"), "-o", str(out),
            "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}", *extra,
        ]
        subprocess.run(cmd, check=True)
    return out


@pytest.fixture
def program(bindir):
    """`program("p2p_suite")` compiles a C test program and returns its path."""
    return lambda name, extra=(): str(compile_c(bindir, name, extra))


def clean_env(**extra):
    """The environment a user would have: no inherited TETHER_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _ucx_loads():
    try:
        ctypes.CDLL("libucp.so.0")
        return True
    except OSError:
        return False


# UCX is loaded at run time: where libucp.so.0 is missing the ucx
# transport is unusable, and the tests that run over it say so and skip.
UCX_LOADS = _ucx_loads()
needs_ucx = pytest.mark.skipif(not UCX_LOADS, reason="libucp.so.0 does not load here (Debian: apt-get install libucx0)")

# UCX's own variables for the two UCX transports tested on one machine:
# TCP pinned to loopback (else UCX takes lo and eth0 as two lanes to a
# same-host peer) and shared memory.
UCX_TLS = {"tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"}, "sm": {"UCX_TLS": "sm"}}


# Transport set-ups the multi-process suites run under: TCP only, shared
# memory only, and two pretend hosts (TETHER_HOST_ID) with shared memory
# inside each and TCP between them.
TRANSPORTS = ["tcp", "shm", "mixed"]


def universe(prog, *args, transport="tcp"):
    """`tether run` arguments and environment for program `alpha` of 2
    ranks and `beta` of 3 running `prog args` under a transport set-up;
    in `mixed`, alpha and beta are on different pretend hosts."""
    alpha, beta = [prog], [prog]
    if transport == "mixed":
        alpha = ["env", "TETHER_HOST_ID=host-a", prog]
        beta = ["env", "TETHER_HOST_ID=host-b", prog]
    env = clean_env(TETHER_TRANSPORTS={"tcp": "tcp", "shm": "shm", "mixed": "shm,tcp"}[transport])
    return ["--name", "alpha", "-n", "2", *alpha, *args, ":", "--name", "beta", "-n", "3", *beta, *args], env


def tether_run(args, timeout=120, env=None, check=True):
    """Runs `tether run ARGS`; returns the CompletedProcess (text output)."""
    proc = subprocess.run(
        [str(TETHER), "run", "--timeout", str(timeout - 5), *args],
        capture_output=True, text=True, timeout=timeout, env=env or clean_env(),
    )
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise AssertionError(f"tether run exited {proc.returncode}")
    return proc


@pytest.fixture
def run(built):
    return tether_run
