"""Two MPI implementations in one coupled run (issue 27): tests/c/mpi_pair.c
built once by MPICH's mpicc and once by Open MPI's, each started by its
own launcher (mpiexec.mpich, mpirun.openmpi) as a segment of one
`tether run`. Every rank checks its own MPI (MPI_Allreduce), joins with
tether_init_mpi, exchanges point to point with every rank of the other
program and takes part in allreduces over TETHER_COMM_UNIVERSE, which span
both MPIs; under TCP and under shared memory between the programs.
MPI itself cannot do this: connect/accept and the MPI-5 ABI both need one
implementation. Launcher options: tests/mpis.py."""

import re
import subprocess

import pytest

from conftest import C_SOURCES, INCLUDE, LIB
from mpis import mpich, open_mpi


@pytest.fixture(scope="module")
def mpis():
    for found in (mpich(), open_mpi()):
        if found.missing:
            pytest.skip(found.missing)
    return mpich(), open_mpi()


def linked_mpis(exe):
    """Which MPI libraries `exe` loads (ldd resolves what its libraries need)."""
    libs = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    return {name for name, soname in (("MPICH", "libmpich.so"), ("Open MPI", "libmpi.so")) if soname in libs}


@pytest.fixture(scope="module")
def pair(built, mpis, tmp_path_factory):
    """mpi_pair built by each MPI's mpicc: {"MPICH": path, "Open MPI": path}."""
    out = tmp_path_factory.mktemp("mpi_pair")
    exes = {}
    for mpi in mpis:
        exe = out / f"mpi_pair_{mpi.name.replace(' ', '_')}"
        subprocess.run([mpi.cc, "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(INCLUDE),
                        str(C_SOURCES / "mpi_pair.c"), "-o", str(exe),
                        "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
        assert linked_mpis(exe) == {mpi.name}, f"{exe} does not load {mpi.name} alone"
        exes[mpi.name] = str(exe)
    return exes


# "[alpha:1] mpi_pair: alpha:1 of 2 on MPICH Version: 4.0.2: exchanged with 3 of beta, universe allreduce over 5"
# (the label's rank comes through the launcher's output relay from tether_init on)
REPORT = re.compile(r"\[(\w+):(\d+)\] mpi_pair: (\w+):(\d+) of (\d+) on (MPICH|Open MPI)(?: Version: | v)[\w.]+: "
                    r"exchanged with (\d+) of (\w+), universe allreduce over (\d+)")


@pytest.mark.parametrize("transports", ["tcp", "shm"])
def test_mpich_and_open_mpi_programs_exchange_and_allreduce(run, mpis, pair, transports):
    by_mpich, by_open_mpi = mpis
    env = by_mpich.env(TETHER_TRANSPORTS=transports, **by_open_mpi.env_extra)
    proc = run(["--name", "alpha", *by_mpich.launcher, "-n", "2", pair["MPICH"], "alpha", "beta", ":",
                "--name", "beta", *by_open_mpi.launcher, "-n", "3", pair["Open MPI"], "beta", "alpha"], env=env)
    reports = {(m[1], int(m[2]), m[3], int(m[4]), int(m[5]), m[6], int(m[7]), m[8], int(m[9]))
               for m in map(REPORT.fullmatch, proc.stdout.splitlines()) if m}
    expected = {("alpha", r, "alpha", r, 2, "MPICH", 3, "beta", 5) for r in range(2)}
    expected |= {("beta", r, "beta", r, 3, "Open MPI", 2, "alpha", 5) for r in range(3)}
    assert reports == expected, proc.stdout + proc.stderr
