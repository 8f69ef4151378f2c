"""An MPI program coupled through include/tether_mpi.h, started by its MPI's
launcher as a `tether run` segment without -n (DESIGN 3.1, 3.9), under
both MPICH (mpiexec.mpich) and Open MPI (mpirun.openmpi):

- head mode: only MPI rank 0 joins (tether_init_mpi_head), exchanges with
  every rank of a plain program, and relays what it got with MPI_Bcast;
- all ranks join (tether_init_mpi) and every pair of processes exchanges;
- a plain program (plain tether_init, no MPI call) started by the MPI
  launcher takes its rank and size from the launcher's environment
  (PMI_RANK/PMI_SIZE under hydra, OMPI_COMM_WORLD_RANK/_SIZE under Open MPI).

The program is tests/c/mpi_head.c, built with the implementation's mpicc
against build/lib; its plain role (`peer`) makes no MPI call. How each
launcher is found, pinned to loopback and allowed to run as root is in
tests/mpis.py.
"""

import subprocess

import pytest

from conftest import C_SOURCES, INCLUDE, LIB
from mpis import IMPLEMENTATIONS


@pytest.fixture(scope="module", params=sorted(IMPLEMENTATIONS))
def mpi(request):
    found = IMPLEMENTATIONS[request.param]()
    if found.missing:
        pytest.skip(found.missing)
    return found


@pytest.fixture(scope="module")
def mpi_head(built, mpi, tmp_path_factory):
    """tests/c/mpi_head.c compiled by this MPI's mpicc against build/lib."""
    exe = tmp_path_factory.mktemp("mpi") / "mpi_head"
    subprocess.run(
        [mpi.cc, "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(INCLUDE),
         str(C_SOURCES / "mpi_head.c"), "-o", str(exe),
         "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"],
        check=True,
    )
    return str(exe)


def output_lines(proc):
    return set(proc.stdout.splitlines())


def test_head_rank_exchanges_and_relays_with_mpi_bcast(run, mpi, mpi_head):
    proc = run(["--name", "sim", *mpi.launcher, "-n", "3", mpi_head, "head", "sim", "ml", ":",
                "--name", "ml", "-n", "4", mpi_head, "peer", "ml", "sim"], env=mpi.env())
    lines = output_lines(proc)
    expected = {"[sim] mpi_head: sim:0 (MPI rank 0 of 3) exchanged with 4 of ml"}
    expected |= {f"[sim] mpi_head: MPI rank {r} of 3 checked 4 messages from ml" for r in range(3)}
    expected |= {f"[ml:{r}] mpi_head: ml:{r} exchanged with 1 of sim" for r in range(4)}
    assert expected <= lines, proc.stdout + proc.stderr
    joined = [line for line in lines if "exchanged with 4 of ml" in line]
    assert len(joined) == 1, "only MPI rank 0 may join in head mode:\n" + proc.stdout


def test_all_mpi_ranks_join(run, mpi, mpi_head):
    proc = run(["--name", "sim", *mpi.launcher, "-n", "2", mpi_head, "all", "sim", "ml", ":",
                "--name", "ml", "-n", "2", mpi_head, "peer", "ml", "sim"], env=mpi.env())
    lines = output_lines(proc)
    expected = {f"[sim] mpi_head: sim:{r} (MPI rank {r} of 2) exchanged with 2 of ml" for r in range(2)}
    expected |= {f"[ml:{r}] mpi_head: ml:{r} exchanged with 2 of sim" for r in range(2)}
    assert expected <= lines, proc.stdout + proc.stderr


def test_plain_tether_init_takes_its_rank_from_the_mpi_launcher(run, mpi, mpi_head):
    """`peer` calls tether_init alone: under the launcher, `tether run` gives
    it no TETHER_RANK/TETHER_SIZE, so its 3 processes are ranks 0..2 of 3
    only if the launcher's own variables are read (else each would be rank
    0 of 1 and the run would fail)."""
    proc = run(["--name", "ml", *mpi.launcher, "-n", "3", mpi_head, "peer", "ml", "sim", ":",
                "--name", "sim", "-n", "2", mpi_head, "peer", "sim", "ml"], env=mpi.env())
    lines = output_lines(proc)
    expected = {f"[ml] mpi_head: ml:{r} exchanged with 2 of sim" for r in range(3)}
    expected |= {f"[sim:{r}] mpi_head: sim:{r} exchanged with 3 of ml" for r in range(2)}
    assert expected <= lines, proc.stdout + proc.stderr
