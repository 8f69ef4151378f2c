"""`make install PREFIX=<tmp>`, then a user's program (tests/install/) built
against the installed tree the documented ways, from outside the repository,
and run under the installed `tether run`:

- `cc prog.c $(pkg-config --cflags --libs tether)`, running without
  LD_LIBRARY_PATH (the rpath in `Libs`);
- libtether.a with `pkg-config --static --libs` (`Libs.private`);
- CMake `find_package(Tether REQUIRED)` and `tether::tether`;
- the Fortran module (tests/install/fortran/exchange.f90): the gfortran
  command docs/fortran.md gives, `pkg-config --cflags --libs
  tether-fortran`, and CMake's component `fortran` (`tether::fortran`).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

PROJECT = Path(__file__).resolve().parent / "install"

INSTALLED = [
    "bin/tether",
    "lib/libtether.so",
    "lib/libtether.a",
    "include/tether.h",
    "include/tether_mpi.h",
    "lib/pkgconfig/tether.pc",
    "lib/cmake/Tether/TetherConfig.cmake",
    "lib/cmake/Tether/TetherConfigVersion.cmake",
]

INSTALLED_FORTRAN = [
    "lib/libtether_fortran.so",
    "lib/libtether_fortran.a",
    "include/tether.mod",
    "include/tether-fortran/tether.f90",
    "lib/pkgconfig/tether-fortran.pc",
]

needs_gfortran = pytest.mark.skipif(shutil.which("gfortran") is None,
                                    reason="gfortran is missing (Debian: apt-get install gfortran, or make deps)")


@pytest.fixture(scope="module")
def prefix(built, tmp_path_factory):
    """A fresh installation prefix, filled by `make install`."""
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run(["make", "-s", "install", f"PREFIX={prefix}"], cwd=ROOT, check=True)
    return prefix


@pytest.fixture
def project(tmp_path):
    """The user's sources, copied outside the repository."""
    source = tmp_path / "src"
    shutil.copytree(PROJECT, source)
    return source


def user_env(prefix):
    """A user's shell after installing: no TETHER_* settings, no
    LD_LIBRARY_PATH, the prefix known to pkg-config and CMake only."""
    env = clean_env(
        PKG_CONFIG_PATH=prefix / "lib" / "pkgconfig",
        CMAKE_PREFIX_PATH=prefix,
    )
    env.pop("LD_LIBRARY_PATH", None)
    return env


def shell(command, cwd, env):
    """Runs `command` in sh as a user would type it; fails with its output."""
    proc = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{command}\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def run_pair(prefix, exe, sizes=(1, 1)):
    """Runs `exe` as programs a and b under the installed `tether run` and
    checks every process's report of its exchange."""
    a, b = sizes
    proc = subprocess.run(
        [str(prefix / "bin" / "tether"), "run", "--timeout", "55",
         "--name", "a", "-n", str(a), str(exe), ":",
         "--name", "b", "-n", str(b), str(exe)],
        cwd=exe.parent, env=user_env(prefix), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = set(proc.stdout.splitlines())
    for name, size, other, peers in (("a", a, "b", b), ("b", b, "a", a)):
        for rank in range(size):
            line = f"[{name}:{rank}] exchange ok: {name}:{rank} with {peers} of {other}"
            assert line in lines, proc.stdout + proc.stderr


def needed_libraries(exe):
    """The DT_NEEDED entries of an ELF executable."""
    dynamic = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True)
    return [line.split("[", 1)[1].rstrip("]") for line in dynamic.stdout.splitlines() if "(NEEDED)" in line]


def test_install_lays_out_the_prefix(prefix):
    missing = [path for path in INSTALLED if not (prefix / path).is_file()]
    assert not missing, f"not installed: {missing}"
    soname = subprocess.run(["readelf", "-d", str(prefix / "lib" / "libtether.so")],
                            capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libtether.so]" in soname


def test_pkg_config_build_runs_without_ld_library_path(prefix, project):
    env = user_env(prefix)
    shell("cc exchange.c -o exchange $(pkg-config --cflags --libs tether)", project, env)
    exe = project / "exchange"
    assert "libtether.so" in needed_libraries(exe)
    run_pair(prefix, exe)


def test_pkg_config_static_build(prefix, project):
    env = user_env(prefix)
    flags = shell("pkg-config --static --libs tether", project, env).split()
    assert "-ltether" in flags
    static_flags = [str(prefix / "lib" / "libtether.a") if f == "-ltether" else f for f in flags]
    cflags = shell("pkg-config --cflags tether", project, env).split()
    subprocess.run(["cc", *cflags, "exchange.c", "-o", "exchange_static", *static_flags],
                   cwd=project, env=env, check=True)
    exe = project / "exchange_static"
    assert not any("tether" in lib for lib in needed_libraries(exe))
    run_pair(prefix, exe)


def test_cmake_find_package(prefix, project):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (Debian: apt-get install cmake, or make deps)")
    env = user_env(prefix)
    shell("cmake -S . -B build -DCMAKE_BUILD_TYPE=Release", project, env)
    shell("cmake --build build", project, env)
    run_pair(prefix, project / "build" / "exchange", sizes=(2, 3))


@needs_gfortran
def test_install_lays_out_the_fortran_module(prefix):
    missing = [path for path in INSTALLED_FORTRAN if not (prefix / path).is_file()]
    assert not missing, f"not installed: {missing}"
    sources = sorted(p.name for p in (prefix / "include" / "tether-fortran").iterdir())
    assert sources == sorted(p.name for p in (ROOT / "fortran").glob("*.f90"))


@needs_gfortran
def test_fortran_documented_command(prefix, project):
    env = user_env(prefix)
    shell(f"gfortran exchange.f90 -o exchange -I{prefix}/include -L{prefix}/lib -ltether_fortran -ltether "
          f"-Wl,-rpath,{prefix}/lib", project / "fortran", env)
    exe = project / "fortran" / "exchange"
    assert "libtether_fortran.so" in needed_libraries(exe)
    run_pair(prefix, exe, sizes=(2, 1))


@needs_gfortran
def test_fortran_pkg_config_build(prefix, project):
    env = user_env(prefix)
    shell("gfortran exchange.f90 -o exchange $(pkg-config --cflags --libs tether-fortran)", project / "fortran", env)
    run_pair(prefix, project / "fortran" / "exchange")


@needs_gfortran
def test_fortran_cmake_component(prefix, project):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (Debian: apt-get install cmake, or make deps)")
    env = user_env(prefix)
    source = project / "fortran"
    shell("cmake -S . -B build -DCMAKE_BUILD_TYPE=Release", source, env)
    shell("cmake --build build", source, env)
    run_pair(prefix, source / "build" / "exchange", sizes=(1, 3))
