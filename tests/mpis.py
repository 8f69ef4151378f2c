"""The MPI implementations the multi-process tests build and launch programs
with: MPICH and Open MPI, side by side (make deps installs both and keeps
MPICH as the default). Each is found by Debian's names for it
(`mpicc.mpich`, `mpiexec.mpich`; `mpicc.openmpi`, `mpirun.openmpi`), else
by the plain `mpicc`/`mpiexec` when those are that implementation.

Every launch stays on this machine's loopback: MPICH's hydra gets
`-iface lo` where it accepts it, Open MPI's TCP wire-up and TCP transport
are limited to `lo` (OMPI_MCA_oob_tcp_if_include, OMPI_MCA_btl_tcp_if_include),
UCX (under either) to the loopback device. Open MPI's mpirun also gets
`--oversubscribe`, since it refuses to start more ranks than it counts
cores on a small CI machine, and, as root (CI containers), `--allow-run-as-root`,
without which it refuses to start at all.
"""

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from conftest import clean_env


@dataclass(frozen=True)
class Mpi:
    name: str                      # "MPICH" or "Open MPI", as MPI_Get_library_version starts
    cc: str = ""                   # its C compiler wrapper
    launcher: tuple = ()           # its launcher with the options above, before -n
    env_extra: dict = field(default_factory=dict)
    missing: str = ""              # why it cannot be used here, or ""

    def env(self, **extra):
        return clean_env(UCX_NET_DEVICES="lo", **self.env_extra, **extra)


def _output(cmd):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=clean_env(UCX_NET_DEVICES="lo"))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc


def _pick(candidates, check):
    """The first (cc, launcher) pair that exists and passes `check(launcher)`."""
    for cc, launcher in candidates:
        if shutil.which(cc) and shutil.which(launcher) and check(launcher):
            return cc, launcher
    return None


@functools.lru_cache(maxsize=None)
def mpich():
    def is_hydra(launcher):
        proc = _output([launcher, "--version"])
        return proc is not None and "HYDRA" in proc.stdout
    found = _pick([("mpicc.mpich", "mpiexec.mpich"), ("mpicc", "mpiexec")], is_hydra)
    if found is None:
        return Mpi("MPICH", missing="MPICH is missing: no mpicc.mpich and mpiexec.mpich, nor an mpiexec that is "
                                    "hydra (Debian: apt-get install mpich libmpich-dev, or make deps)")
    cc, launcher = found
    probe = _output([launcher, "-iface", "lo", "-n", "1", "true"])
    iface = ("-iface", "lo") if probe is not None and probe.returncode == 0 else ()
    return Mpi("MPICH", cc, (launcher, *iface))


@functools.lru_cache(maxsize=None)
def open_mpi():
    def is_open_mpi(launcher):
        proc = _output([launcher, "--version"])
        # "mpirun (Open MPI) 5.0.3", "mpirun.openmpi (OpenRTE) 4.1.4"
        return proc is not None and any(word in proc.stdout for word in ("Open MPI", "OpenRTE"))
    found = _pick([("mpicc.openmpi", "mpirun.openmpi"), ("mpicc", "mpirun")], is_open_mpi)
    if found is None:
        return Mpi("Open MPI", missing="Open MPI is missing: no mpicc.openmpi and mpirun.openmpi, nor an mpirun "
                                       "that is Open MPI's (Debian: apt-get install openmpi-bin libopenmpi-dev, "
                                       "or make deps)")
    cc, launcher = found
    root = ("--allow-run-as-root",) if os.geteuid() == 0 else ()
    return Mpi("Open MPI", cc, (launcher, "--oversubscribe", *root),
               {"OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl_tcp_if_include": "lo"})


IMPLEMENTATIONS = {"mpich": mpich, "openmpi": open_mpi}
