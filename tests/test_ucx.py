"""UCX is loaded at run time, never linked: Tether builds and runs where
UCX is absent, and `tether info` says whether UCX loads here and why not.
(The binding's own tests, with UCX present, are crates/tether-ucx/tests.)"""

import shutil
import subprocess

import pytest

from conftest import LIB, TETHER, clean_env


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_nothing_links_against_ucx(built):
    for binary in (TETHER, LIB / "libtether.so"):
        dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True,
                                 check=True).stdout
        needed = [line for line in dynamic.splitlines() if "NEEDED" in line]
        assert needed, dynamic
        assert not any("libucp" in line or "libucs" in line for line in needed), needed


def info_ucx_line(**env):
    out = subprocess.run([str(TETHER), "info"], capture_output=True, text=True, check=True,
                         env=clean_env(**env)).stdout
    lines = [line for line in out.splitlines() if line.strip().startswith("ucx ")]
    assert len(lines) == 1, out
    return lines[0]


def test_info_says_why_ucx_is_not_usable_when_the_library_is_missing(built):
    line = info_ucx_line(TETHER_UCX_LIB="libucp.so.99")
    assert "not a transport yet" in line and "cannot load libucp.so.99" in line, line


def test_info_names_the_ucx_version_when_it_loads(built):
    line = info_ucx_line()
    if "cannot load" in line:
        pytest.skip(f"no UCX on this machine: {line.strip()}")
    assert "UCX 1." in line and "loads here" in line, line
