"""The Fortran module `tether` (fortran/, DESIGN 3.10), built by `make
build` into build/include and build/lib:

- its constants are tether.h's, and its status array has tether_status's
  layout (checked here against the header and a C compiler); it and the
  heat example compile without a warning;
- point to point (tests/fortran/p2p_suite.f90) with scalars and 1-D and
  3-D arrays of every intrinsic type, truncation and bad arguments reaching
  ierr, under every transport set-up;
- every collective, blocking and non-blocking (coll_suite.f90);
- one-sided operations (rma_suite.f90) and active messages with bind(C)
  handlers (am_suite.f90), and the docs' examples of both;
- a Fortran program and a C program exchanging in both directions, and
  reducing together (TETHER_DOUBLE_PRECISION meeting TETHER_DOUBLE).
"""

import re
import shutil
import subprocess

import pytest

from conftest import C_SOURCES, INCLUDE, LIB, ROOT, TRANSPORTS, tether_run, universe

FORTRAN_TESTS = ROOT / "tests" / "fortran"
MODULES = ROOT / "build" / "include"

pytestmark = pytest.mark.skipif(shutil.which("gfortran") is None,
                                reason="gfortran is missing (Debian: apt-get install gfortran, or make deps)")


@pytest.fixture(scope="module")
def fortran(built, tmp_path_factory):
    """`fortran("p2p_suite")` compiles tests/fortran/<name>.f90 (with the
    checks module) against the built module and libraries."""
    assert (MODULES / "tether.mod").exists(), "make build did not build the Fortran module"
    out = tmp_path_factory.mktemp("fortran")

    def compile_program(name):
        exe = out / name
        if not exe.exists():
            subprocess.run(
                ["gfortran", "-std=f2018", "-Wall", "-Werror", "-O2", "-I", str(MODULES), "-J", str(out),
                 str(FORTRAN_TESTS / "checks.f90"), str(FORTRAN_TESTS / f"{name}.f90"), "-o", str(exe),
                 "-L", str(LIB), "-ltether_fortran", "-ltether", f"-Wl,-rpath,{LIB}"],
                check=True,
            )
        return str(exe)

    return compile_program


def test_module_and_example_compile_without_warnings(tmp_path):
    """The build does not stop on a warning (another gfortran may warn about
    more); this test does, for the module and the heat example."""
    sources = [ROOT / "fortran" / f"{name}.f90" for name in
               ("tether_c", "tether_support", "tether_setup", "tether_p2p", "tether_collectives",
                "tether_fields", "tether_onesided", "tether_active", "tether")]
    subprocess.run(["gfortran", "-std=f2018", "-Wall", "-Wextra", "-Werror", "-J", str(tmp_path), "-c", *sources],
                   cwd=tmp_path, check=True)
    heat = ROOT / "examples" / "heat3d"
    if shutil.which("mpifort"):
        subprocess.run(["mpifort", "-std=f2018", "-Wall", "-Werror", "-O2", "-I", str(tmp_path), "-J", str(tmp_path),
                        "-c", heat / "solver.f90", heat / "report.f90", heat / "file" / "mailbox.f90",
                        heat / "tether" / "peers.f90"], cwd=tmp_path, check=True)
        for version in ("file", "tether"):
            for code in ("code1", "code2", "code3"):
                subprocess.run(["mpifort", "-std=f2018", "-Wall", "-Werror", "-O2", "-I", str(tmp_path), "-c",
                                heat / version / f"{code}.f90", "-o", f"{version}_{code}.o"], cwd=tmp_path, check=True)


def header_constants():
    text = (INCLUDE / "tether.h").read_text()
    return {name: int(value) for name, value in re.findall(r"^#define (TETHER_\w+) (-?\d+)$", text, re.M)}


def fortran_constants():
    text = (ROOT / "fortran" / "tether_c.f90").read_text()
    pairs = re.findall(r"integer, parameter :: (TETHER_\w+) = (-?\d+|TETHER_\w+)", text)
    values = {}
    for name, value in pairs:
        values[name] = values[value] if value.startswith("TETHER_") else int(value)
    return values


def test_constants_are_the_headers():
    c, f = header_constants(), fortran_constants()
    assert len(c) > 70, "the header's constants were not found"
    # Fortran ignores case: TETHER_FIELD_PUT/_GET would clash with the
    # subroutines tether_field_put/_get, so Fortran has the modes only as
    # TETHER_FIELD_MODE_PUT/_GET (DESIGN 3.8).
    missing = sorted(set(c) - set(f) - {"TETHER_FIELD_PUT", "TETHER_FIELD_GET"})
    assert not missing, f"tether.h constants missing from fortran/tether_c.f90: {missing}"
    wrong = {name: (c[name], f[name]) for name in c if name in f and f[name] != c[name]}
    assert not wrong, f"Fortran constants differing from tether.h (C, Fortran): {wrong}"
    fortran_only = set(f) - set(c)
    assert fortran_only == {"TETHER_STATUS_SIZE", "TETHER_SOURCE", "TETHER_TAG", "TETHER_ERROR",
                            "TETHER_STATUS_BYTES", "TETHER_CHARACTER",
                            "TETHER_FIELD_MODE_PUT", "TETHER_FIELD_MODE_GET"}, fortran_only


def test_status_array_has_the_c_layout(tmp_path):
    probe = tmp_path / "layout.c"
    probe.write_text(
        '#include <stddef.h>\n#include <stdio.h>\n#include "tether.h"\n'
        "int main(void) { printf(\"%zu %zu %zu %zu %zu\\n\", sizeof(tether_status),"
        " offsetof(tether_status, source), offsetof(tether_status, tag),"
        " offsetof(tether_status, error), offsetof(tether_status, bytes)); return 0; }\n")
    subprocess.run(["cc", "-I", str(INCLUDE), str(probe), "-o", str(tmp_path / "layout")], check=True)
    size, source, tag, error, nbytes = map(int, subprocess.run(
        [str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout.split())
    f = fortran_constants()
    assert size == 4 * f["TETHER_STATUS_SIZE"]
    assert (source, tag, error, nbytes) == tuple(4 * (f[k] - 1) for k in (
        "TETHER_SOURCE", "TETHER_TAG", "TETHER_ERROR", "TETHER_STATUS_BYTES"))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_point_to_point(fortran, transport):
    args, env = universe(fortran("p2p_suite"), transport=transport)
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok p2p") == 5, proc.stdout
    assert "[beta:2] identity beta rank 2 universe 4 of 5" in proc.stdout


def test_every_collective_blocking_and_not(fortran):
    args, env = universe(fortran("coll_suite"))
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok collectives") == 5, proc.stdout


def test_fortran_and_c_exchange_both_ways(fortran, program):
    peer = program("fortran_peer")
    proc = tether_run(["--name", "fcode", "-n", "2", fortran("mixed"), ":", "--name", "ccode", "-n", "2", peer])
    lines = set(proc.stdout.splitlines())
    assert {"[ccode:0] C checked the Fortran array of fcode:0", "[ccode:1] C checked the Fortran array of fcode:1",
            "[fcode:0] fortran got 6516.0 from C", "[fcode:1] fortran got 30516.0 from C"} <= lines, proc.stdout


def test_fortran_fields_put_and_get_every_element(fortran):
    # A Fortran-order 2x2 BLOCK producer to a C-order BLOCK_CYCLIC consumer:
    # the data arrive transposed by logical index; DOUBLE_PRECISION meets
    # DOUBLE; blocking and non-blocking steps; a wrong step refused.
    suite = fortran("field_suite")
    proc = tether_run(["--name", "prod", "-n", "4", suite, ":", "--name", "cons", "-n", "3", suite])
    assert proc.stdout.count("ok fortran fields") == 7, proc.stdout


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_sided_put_get_accumulate_and_atomics(fortran, transport):
    # tests/fortran/rma_suite.f90 on alpha (2) and beta (3) over
    # TETHER_COMM_UNIVERSE: put/get after flush and fence, rput/rget,
    # accumulate SUM, a fetch_and_op counter, compare_and_swap, refused
    # out-of-window accesses.
    args, env = universe(fortran("rma_suite"), transport=transport)
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok fortran rma") == 5, proc.stdout + proc.stderr


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_active_messages(fortran, transport):
    # tests/fortran/am_suite.f90 on alpha (2) and beta (3) over
    # TETHER_COMM_UNIVERSE, handlers as bind(C) module procedures:
    # request/response answered from inside a handler, blocking calls
    # refused there, NREP messages of each of 0 B to 1 MiB from every rank
    # to every rank delivered exactly once, bad arguments refused.
    args, env = universe(fortran("am_suite"), transport=transport)
    proc = tether_run(args, env=env)
    assert proc.stdout.count("ok fortran am") == 5, proc.stdout + proc.stderr


def test_active_message_example_of_the_docs(fortran, tmp_path):
    # The `rpc` program of docs/fortran.md, compiled without warnings but
    # the unused handler arguments the docs mention, prints what the docs
    # show (in some order) under the line they give.
    doc = (ROOT / "docs" / "fortran.md").read_text()
    source = re.search(r"```fortran\n(module rpc_handlers\n.*?)```", doc, re.S).group(1)
    (tmp_path / "rpc.f90").write_text(source)
    exe = tmp_path / "rpc"
    subprocess.run(["gfortran", "-std=f2018", "-Wall", "-Wno-unused-dummy-argument", "-Werror", "-I", str(MODULES),
                    "-J", str(tmp_path), str(tmp_path / "rpc.f90"), "-o", str(exe), "-L", str(LIB),
                    "-ltether_fortran", "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
    shown = re.search(r"\$ tether run (--name a -n 2 \./rpc .*?)\n((?:\[.*\n)+)", doc)
    proc = tether_run(shown.group(1).replace("./rpc", str(exe)).split())
    assert sorted(proc.stdout.splitlines()) == sorted(shown.group(2).splitlines()), proc.stdout


def test_one_sided_example_of_the_docs(fortran, tmp_path):
    # The `ring` program of docs/fortran.md, compiled without warnings,
    # prints what the docs show (in some order) under the line they give.
    doc = (ROOT / "docs" / "fortran.md").read_text()
    source = re.search(r"```fortran\n(program ring\n.*?)```", doc, re.S).group(1)
    (tmp_path / "ring.f90").write_text(source)
    exe = tmp_path / "ring"
    subprocess.run(["gfortran", "-std=f2018", "-Wall", "-Werror", "-I", str(MODULES), "-J", str(tmp_path),
                    str(tmp_path / "ring.f90"), "-o", str(exe), "-L", str(LIB), "-ltether_fortran", "-ltether",
                    f"-Wl,-rpath,{LIB}"], check=True)
    shown = re.search(r"\$ tether run (--name a .*?)\n((?:\[.*\n)+)", doc)
    proc = tether_run(shown.group(1).replace("./ring", str(exe)).split())
    assert sorted(proc.stdout.splitlines()) == sorted(shown.group(2).splitlines()), proc.stdout
