"""An MPI program coupled through include/tether_mpi.h, with MPICH's mpiexec
started by `tether run` as a segment without -n (DESIGN 3.1, 3.9):

- head mode: only MPI rank 0 joins (tether_init_mpi_head), exchanges with
  every rank of a plain program, and relays what it got with MPI_Bcast;
- all ranks join (tether_init_mpi) and every pair of processes exchanges.

The program is tests/c/mpi_head.c, built with the system's mpicc against
build/lib; its plain role (`peer`) makes no MPI call. mpiexec is pinned to
loopback (-iface lo where hydra accepts it, UCX_NET_DEVICES=lo).
"""

import functools
import shutil
import subprocess

import pytest

from conftest import C_SOURCES, INCLUDE, LIB, clean_env


def hydra_version():
    """The `mpiexec --version` text when mpiexec is MPICH's hydra, else None."""
    try:
        proc = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if "HYDRA" in proc.stdout else None


pytestmark = [
    pytest.mark.skipif(
        shutil.which("mpicc") is None or shutil.which("mpiexec") is None,
        reason="mpicc or mpiexec is missing (Debian: apt-get install mpich libmpich-dev, or make deps)",
    ),
    pytest.mark.skipif(
        shutil.which("mpiexec") is not None and hydra_version() is None,
        reason="mpiexec is not MPICH's hydra (these tests use MPICH's launcher options)",
    ),
]


def mpi_env():
    return clean_env(UCX_NET_DEVICES="lo")


@functools.lru_cache(maxsize=None)
def mpiexec():
    """mpiexec with `-iface lo` when this hydra accepts it."""
    probe = subprocess.run(["mpiexec", "-iface", "lo", "-n", "1", "true"],
                           capture_output=True, env=mpi_env(), timeout=60)
    return ("mpiexec", "-iface", "lo") if probe.returncode == 0 else ("mpiexec",)


@pytest.fixture(scope="module")
def mpi_head(built, tmp_path_factory):
    """tests/c/mpi_head.c compiled by mpicc against build/lib."""
    exe = tmp_path_factory.mktemp("mpi") / "mpi_head"
    subprocess.run(
        ["mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(INCLUDE),
         str(C_SOURCES / "mpi_head.c"), "-o", str(exe),
         "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"],
        check=True,
    )
    return str(exe)


def output_lines(proc):
    return set(proc.stdout.splitlines())


def test_head_rank_exchanges_and_relays_with_mpi_bcast(run, mpi_head):
    proc = run(["--name", "sim", *mpiexec(), "-n", "3", mpi_head, "head", "sim", "ml", ":",
                "--name", "ml", "-n", "4", mpi_head, "peer", "ml", "sim"], env=mpi_env())
    lines = output_lines(proc)
    expected = {"[sim] mpi_head: sim:0 (MPI rank 0 of 3) exchanged with 4 of ml"}
    expected |= {f"[sim] mpi_head: MPI rank {r} of 3 checked 4 messages from ml" for r in range(3)}
    expected |= {f"[ml:{r}] mpi_head: ml:{r} exchanged with 1 of sim" for r in range(4)}
    assert expected <= lines, proc.stdout + proc.stderr
    joined = [line for line in lines if "exchanged with 4 of ml" in line]
    assert len(joined) == 1, "only MPI rank 0 may join in head mode:\n" + proc.stdout


def test_all_mpi_ranks_join(run, mpi_head):
    proc = run(["--name", "sim", *mpiexec(), "-n", "2", mpi_head, "all", "sim", "ml", ":",
                "--name", "ml", "-n", "2", mpi_head, "peer", "ml", "sim"], env=mpi_env())
    lines = output_lines(proc)
    expected = {f"[sim] mpi_head: sim:{r} (MPI rank {r} of 2) exchanged with 2 of ml" for r in range(2)}
    expected |= {f"[ml:{r}] mpi_head: ml:{r} exchanged with 2 of sim" for r in range(2)}
    assert expected <= lines, proc.stdout + proc.stderr
