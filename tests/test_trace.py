"""Traces (TETHER_TRACE, `tether trace merge|summary`, docs/tracing.md):
a C program on 2 processes, a Fortran program and a Python program
(tests/{c,fortran,python}/trace_peers.*) exchange messages every round;
the Python program sends each round late. The Fortran process's clock is
shifted by 5 s (TETHER_TRACE_CLOCK_SHIFT_NS, through `--env`), as if its
host's clock were off. The merged trace must pair every send with exactly
one receive, no receive may end before its send started once clocks are
aligned (within the measured round trip), and the summary must blame the
late program for the others' waiting."""

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from conftest import C_SOURCES, INCLUDE, LIB, ROOT, TETHER, clean_env, tether_run

MODULES = ROOT / "build" / "include"
SHIFT_NS = 5_000_000_000


@pytest.fixture(scope="module")
def programs(built, python_package, tmp_path_factory):
    if shutil.which("gfortran") is None:
        pytest.skip("gfortran is missing (Debian: apt-get install gfortran, or make deps)")
    out = tmp_path_factory.mktemp("trace")
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(INCLUDE), "-I", str(C_SOURCES),
                    str(C_SOURCES / "trace_peers.c"), "-o", str(out / "trace_c"),
                    "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
    fortran = ROOT / "tests" / "fortran"
    subprocess.run(["gfortran", "-std=f2018", "-Wall", "-Werror", "-O2", "-I", str(MODULES), "-J", str(out),
                    str(fortran / "checks.f90"), str(fortran / "trace_peers.f90"), "-o", str(out / "trace_f"),
                    "-L", str(LIB), "-ltether_fortran", "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
    return out


def run_traced(programs, trace_dir, transport, rounds=3, delay_ms=150):
    args = [str(rounds), "late", str(delay_ms)]
    return tether_run(["--name", "csim", "-n", "2", str(programs / "trace_c"), *args, ":",
                       "--name", "fort", "--env", f"TETHER_TRACE_CLOCK_SHIFT_NS={SHIFT_NS}", "-n", "1",
                       str(programs / "trace_f"), *args, ":",
                       "--name", "late", "-n", "1", sys.executable, str(ROOT / "tests" / "python" / "trace_peers.py"),
                       *args],
                      env=clean_env(TETHER_TRACE=str(trace_dir), TETHER_TRANSPORTS=transport))


def clock_lines(trace_dir):
    lines = {}
    for path in trace_dir.glob("*.jsonl"):
        lines[path.stem] = [json.loads(line) for line in path.read_text().splitlines() if '"clock"' in line]
    return lines


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_three_languages_merge_align_and_the_late_program_is_blamed(programs, tmp_path, transport):
    trace_dir = tmp_path / "trace"
    proc = run_traced(programs, trace_dir, transport)
    assert proc.stdout.count("ok trace") == 4, proc.stdout + proc.stderr
    assert sorted(p.name for p in trace_dir.iterdir()) == ["csim.0.jsonl", "csim.1.jsonl", "fort.0.jsonl",
                                                          "late.0.jsonl"]

    clocks = clock_lines(trace_dir)
    assert all([c["clock"] for c in clocks[name]] == ["join", "finalize"] for name in clocks), clocks
    worst = max(c["round_trip"] for samples in clocks.values() for c in samples)
    for sample in clocks["fort.0"]:
        assert abs(sample["offset"] + SHIFT_NS) <= sample["round_trip"], sample

    merged = tmp_path / "run.json"
    out = subprocess.run([str(TETHER), "trace", "merge", str(trace_dir), "-o", str(merged)],
                         capture_output=True, text=True, check=True).stdout
    # Per round each process sends to every process of the other programs:
    # 2 x 2 from csim, 3 from fort, 3 from late; 3 rounds.
    assert "4 processes, 30 sends, 30 paired with their receive" in out, out
    events = json.loads(merged.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    sends = [e for e in slices if e["name"].startswith("send to")]
    recvs = [e for e in slices if e["name"].startswith("recv from")]
    assert len(sends) == len(recvs) == 30
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == 30 and starts.keys() == ends.keys()
    landing = {(e["pid"], e["tid"], e["ts"]) for e in ends.values()}
    assert len(landing) == 30, "two flows end on the same receive"
    for flow, start in starts.items():
        assert ends[flow]["ts"] >= start["ts"] - worst / 1000, (start, ends[flow])
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {"csim", "fort", "late"}
    assert any(e["name"] == "allreduce" for e in slices)

    summary = subprocess.run([str(TETHER), "trace", "summary", str(trace_dir)],
                             capture_output=True, text=True, check=True).stdout
    for waiter in ("csim", "fort"):
        line = next((ln for ln in summary.splitlines() if ln.strip().startswith(f"{waiter} waited")), "")
        assert line.endswith("of its time on late"), summary
        assert int(line.split()[2].rstrip("%")) >= 50, summary
    assert f"csim         -> late         {transport}" in summary, summary

    if importlib.util.find_spec("matplotlib") is not None:
        png = tmp_path / "waits.png"
        drawn = subprocess.run([str(TETHER), "trace", "summary", str(trace_dir), "--plot", str(png)],
                               capture_output=True, text=True, env=clean_env(PYTHON=sys.executable))
        assert drawn.returncode == 0, drawn.stderr
        assert png.read_bytes().startswith(b"\x89PNG"), "--plot wrote no PNG"


def test_a_trace_directory_that_cannot_be_made_fails_at_init(programs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = tether_run(["--name", "csim", "-n", "1", str(programs / "trace_c"), "1", "none", "0"],
                      env=clean_env(TETHER_TRACE=str(blocker / "sub")), check=False)
    assert proc.returncode != 0
    assert f"TETHER_TRACE={blocker / 'sub'}: cannot create the directory" in proc.stdout + proc.stderr
