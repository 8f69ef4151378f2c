"""The heat coupling example (examples/heat3d), in deterministic mode: the
file-coupled version (s1.out, s2.out) and the Tether version (isend/irecv/
waitall between the programs, MPICH inside Code-2 and Code-3) compute the
same temperature history, within 1e-12, and both report their time per
coupling step. Runs examples/heat3d/run.sh, as `make demo` does."""

import shutil
import subprocess

import pytest

from conftest import ROOT, clean_env

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("gfortran", "mpifort", "mpiexec")),
    reason="gfortran, mpifort or mpiexec is missing (Debian: apt-get install gfortran mpich libmpich-dev, or make deps)",
)


def history(path):
    rows = [list(map(float, line.split())) for line in path.read_text().splitlines() if not line.startswith("#")]
    assert rows, f"{path} is empty"
    return rows


def test_file_and_tether_versions_agree(built, tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "examples" / "heat3d" / "run.sh"), "--quiet", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for version in ("file", "tether"):
        log = (tmp_path / f"{version}.log").read_text()
        for code in ("code1", "code2", "code3"):
            assert f"{code}: 20 coupling steps," in log, log
    for name, columns in (("code2_history.txt", 6), ("code3_history.txt", 4)):
        by_file, by_tether = history(tmp_path / "file" / name), history(tmp_path / "tether" / name)
        assert len(by_file) == len(by_tether) == 20
        assert all(len(row) == columns for row in by_file + by_tether)
        assert [row[0] for row in by_file] == list(range(1, 21))
        temperatures = [abs(value) for row in by_file for value in row[1:]]
        assert max(temperatures) > 1.0, "the source never heated the box"
        for a, b in zip(by_file, by_tether):
            assert all(abs(x - y) <= 1e-12 for x, y in zip(a, b)), (name, a, b)
    assert "file and Tether versions differ by at most" in proc.stdout
    assert not list((tmp_path / "file").glob("s[12].out*")), "the file version left a record behind"
