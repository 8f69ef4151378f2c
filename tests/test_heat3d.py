"""The heat coupling example (examples/heat3d), in deterministic mode: the
file-coupled version (s1.out, s2.out), the Tether version (isend/irecv/
waitall between the programs, MPICH inside Code-2 and Code-3) and, where
Open MPI is installed beside MPICH, the mixed-MPI version (Code-2 built
and launched by MPICH, Code-3 by Open MPI, Tether between them) compute
the same temperature history bit for bit, and each code reports its time
per coupling step. Runs examples/heat3d/run.sh once, as `make demo` does."""

import shutil
import subprocess

import pytest

from conftest import ROOT, clean_env

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("gfortran", "mpifort", "mpiexec")),
    reason="gfortran, mpifort or mpiexec is missing (Debian: apt-get install gfortran mpich libmpich-dev, or make deps)",
)

OPEN_MPI_TOOLS = ("mpifort.mpich", "mpiexec.mpich", "mpifort.openmpi", "mpirun.openmpi", "mpicc.openmpi")
HISTORIES = (("code2_history.txt", 6), ("code3_history.txt", 4))


def history(path):
    rows = [list(map(float, line.split())) for line in path.read_text().splitlines() if not line.startswith("#")]
    assert rows, f"{path} is empty"
    return rows


@pytest.fixture(scope="module")
def demo(built, tmp_path_factory):
    """run.sh's output directory and stdout (every version it can run)."""
    out = tmp_path_factory.mktemp("heat3d")
    proc = subprocess.run(["bash", str(ROOT / "examples" / "heat3d" / "run.sh"), "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc.stdout


def check_same_as_tether(out, version):
    """`version`'s histories are the Tether version's, byte for byte (17
    significant digits: the same doubles), and a real 20-step run."""
    for name, columns in HISTORIES:
        rows = history(out / version / name)
        assert len(rows) == 20 and all(len(row) == columns for row in rows)
        assert [row[0] for row in rows] == list(range(1, 21))
        assert max(abs(value) for row in rows for value in row[1:]) > 1.0, "the source never heated the box"
        assert (out / version / name).read_text() == (out / "tether" / name).read_text(), (version, name)


def test_file_and_tether_versions_agree(demo):
    out, stdout = demo
    for version in ("file", "tether"):
        log = (out / f"{version}.log").read_text()
        for code in ("code1", "code2", "code3"):
            assert f"{code}: 20 coupling steps," in log, log
    check_same_as_tether(out, "file")
    assert "== 20 steps: file and Tether versions differ by at most 0.0e+00 (bit for bit the same;" in stdout, stdout
    assert not list((out / "file").glob("s[12].out*")), "the file version left a record behind"


def linked_mpis(exe):
    """Which MPI libraries `exe` loads (ldd resolves what its libraries need)."""
    libs = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    return {name for name, soname in (("MPICH", "libmpich.so"), ("Open MPI", "libmpi.so")) if soname in libs}


@pytest.mark.skipif(any(shutil.which(tool) is None for tool in OPEN_MPI_TOOLS),
                    reason="the mixed-MPI version needs MPICH and Open MPI under their Debian names "
                           f"({', '.join(OPEN_MPI_TOOLS)}); apt-get install openmpi-bin libopenmpi-dev, or make deps")
def test_mixed_mpi_version_agrees_bit_for_bit(demo):
    """Code-2 on MPICH under mpiexec.mpich, Code-3 on Open MPI under
    mpirun.openmpi: each solver's own MPI is the one it was built with, and
    the temperatures are the single-MPI and file versions' exactly."""
    out, stdout = demo
    log = (out / "mixed.log").read_text()
    assert "[code2:0] heat solver: 16 x 16 x 16 elements on 2 MPI ranks of MPICH" in log, log
    assert "[code3:0] heat solver: 16 x 16 x 16 elements on 2 MPI ranks of Open MPI" in log, log
    for code in ("code1", "code2", "code3"):
        assert f"{code}: 20 coupling steps," in log, log
    assert linked_mpis(out / "mixed" / "code2") == {"MPICH"}
    assert linked_mpis(out / "mixed" / "code3") == {"Open MPI"}
    check_same_as_tether(out, "mixed")
    assert "== 20 steps: mixed and Tether versions differ by at most 0.0e+00 (bit for bit the same;" in stdout, stdout
    assert "mpirun.openmpi" in stdout and "mpiexec.mpich" in stdout
