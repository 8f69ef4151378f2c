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
    # Only the joined rank's lines carry its rank ([sim:0]).
    expected = {"[sim:0] mpi_head: sim:0 (MPI rank 0 of 3) exchanged with 4 of ml"}
    expected |= {"[sim:0] mpi_head: MPI rank 0 of 3 checked 4 messages from ml"}
    expected |= {f"[sim] mpi_head: MPI rank {r} of 3 checked 4 messages from ml" for r in (1, 2)}
    expected |= {f"[ml:{r}] mpi_head: ml:{r} exchanged with 1 of sim" for r in range(4)}
    assert expected <= lines, proc.stdout + proc.stderr
    joined = [line for line in lines if "exchanged with 4 of ml" in line]
    assert len(joined) == 1, "only MPI rank 0 may join in head mode:\n" + proc.stdout


def test_all_mpi_ranks_join(run, mpi, mpi_head):
    proc = run(["--name", "sim", *mpi.launcher, "-n", "2", mpi_head, "all", "sim", "ml", ":",
                "--name", "ml", "-n", "2", mpi_head, "peer", "ml", "sim"], env=mpi.env())
    lines = output_lines(proc)
    expected = {f"[sim:{r}] mpi_head: sim:{r} (MPI rank {r} of 2) exchanged with 2 of ml" for r in range(2)}
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
    expected = {f"[ml:{r}] mpi_head: ml:{r} exchanged with 2 of sim" for r in range(3)}
    expected |= {f"[sim:{r}] mpi_head: sim:{r} exchanged with 3 of ml" for r in range(2)}
    assert expected <= lines, proc.stdout + proc.stderr


@pytest.mark.parametrize("ending", ["finalize", "exit"])
def test_ranks_behind_the_mpi_launcher_label_their_output(run, mpi, program, ending):
    """A segment started through the MPI's launcher: each process's lines
    carry its rank from tether_init on ([name:rank], as for a segment with
    -n), all of them (many lines, stderr, a last line without a newline,
    exit without finalize); lines before init keep [name]."""
    prog = program("labelled_output")
    lines = 3000
    proc = run(["--name", "code2", *mpi.launcher, "-n", "2", prog, str(lines), ending, ":",
                "--name", "plain", "-n", "1", prog, "5", ending], env=mpi.env())
    out = proc.stdout.splitlines()
    for rank in range(2):
        mine = [line for line in out if line.startswith(f"[code2:{rank}] ")]
        want = [f"[code2:{rank}] line {i} of rank {rank}" for i in range(lines)]
        want.append(f"[code2:{rank}] last line of rank {rank} without a newline")
        if ending == "finalize":
            want.append(f"[code2:{rank}] after finalize of rank {rank}")
        assert mine == want, f"rank {rank}: {len(mine)} lines, first differences: " + \
            str([(a, b) for a, b in zip(mine, want) if a != b][:3])
        assert f"[code2:{rank}] stderr of rank {rank}" in proc.stderr.splitlines()
    assert out.count("[code2] before init") == 2
    assert not [line for line in out if line.startswith("[code2] ") and "before init" not in line]
    assert "[plain:0] line 4 of rank 0" in out and "[plain:0] before init" in out
    assert "TETHER_OUTPUT_RELAY" not in proc.stderr


def test_processes_that_never_join_keep_the_program_label(run, mpi, mpi_head):
    """In head mode only MPI rank 0 joins: its lines are [sim:0], the other
    ranks' stay [sim] (Tether does not know their ranks)."""
    proc = run(["--name", "sim", *mpi.launcher, "-n", "2", mpi_head, "head", "sim", "ml", ":",
                "--name", "ml", "-n", "1", mpi_head, "peer", "ml", "sim"], env=mpi.env())
    lines = output_lines(proc)
    assert "[sim:0] mpi_head: MPI rank 0 of 2 checked 1 messages from ml" in lines, proc.stdout
    assert "[sim] mpi_head: MPI rank 1 of 2 checked 1 messages from ml" in lines, proc.stdout
