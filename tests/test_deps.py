"""`make deps-system` installs Open MPI beside MPICH without changing which
MPI `mpicc`, `mpifort`, `mpirun` and `mpiexec` mean (Debian's alternatives
`mpi`, `mpirun` and `mpi-<arch>`, in which Open MPI outranks MPICH).

A fresh machine cannot be made here, so the Makefile's recipe runs against
a pretend Debian: `dpkg-query`, `apt-get`, `apt-cache`, `update-alternatives`
and `id` on the PATH are one stub (below) over a JSON state, whose
`apt-get install` runs what the real packages' postinst scripts do to the
alternatives (registration, and in auto mode the highest priority wins).
Nothing on this machine is installed or changed.
"""

import json
import os
import subprocess
import sys

from conftest import ROOT

ARCH = "x86_64-linux-gnu"
# What each package's postinst registers: group -> (path, priority), as
# Debian 12's mpich, libmpich-dev, openmpi-bin and libopenmpi-dev do.
REGISTERS = {
    "mpich": {"mpi": ("/usr/bin/mpicc.mpich", 40), "mpirun": ("/usr/bin/mpirun.mpich", 40)},
    "libmpich-dev": {f"mpi-{ARCH}": (f"/usr/include/{ARCH}/mpich", 40)},
    "openmpi-bin": {"mpi": ("/usr/bin/mpicc.openmpi", 50), "mpirun": ("/usr/bin/mpirun.openmpi", 50)},
    "libopenmpi-dev": {f"mpi-{ARCH}": (f"/usr/lib/{ARCH}/openmpi/include", 50)},
}
MPICH = {"mpi": "/usr/bin/mpicc.mpich", "mpirun": "/usr/bin/mpirun.mpich", f"mpi-{ARCH}": f"/usr/include/{ARCH}/mpich"}
OPENMPI = {"mpi": "/usr/bin/mpicc.openmpi", "mpirun": "/usr/bin/mpirun.openmpi",
           f"mpi-{ARCH}": f"/usr/lib/{ARCH}/openmpi/include"}

STUB = r'''#!PYTHON
import json, os, sys
path = os.environ["FAKE_DEBIAN"]
state = json.load(open(path))
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
state["log"].append([tool] + args)

def register(package):
    for group, (alt, prio) in state["registers"].get(package, {}).items():
        g = state["groups"].setdefault(group, {"mode": "auto", "alts": {}, "value": None})
        g["alts"][alt] = prio
        if g["mode"] == "auto":
            g["value"] = max(g["alts"], key=g["alts"].get)

out, code = "", 0
if tool == "id":
    out = f"{state['uid']}\n"
elif tool == "dpkg-query":
    package = args[-1]
    if package in state["installed"]:
        out = "install ok installed"
    else:
        code = 1
elif tool == "apt-cache":
    pass
elif tool == "apt-get":
    if "install" in args:
        for package in [a for a in args[args.index("install") + 1:] if not a.startswith("-")]:
            if package not in state["installed"]:
                state["installed"].append(package)
                register(package)
elif tool == "update-alternatives":
    groups = state["groups"]
    if args == ["--get-selections"]:
        out = "".join(f"{n:<30} {g['mode']:<8} {g['value']}\n" for n, g in sorted(groups.items()))
    elif args[0] == "--list":
        if args[1] in groups:
            out = "".join(f"{a}\n" for a in groups[args[1]]["alts"])
        else:
            code = 2
    elif args[:2] == ["--quiet", "--set"]:
        name, alt = args[2], args[3]
        if alt not in groups.get(name, {}).get("alts", {}):
            code = 2
        else:
            groups[name].update(mode="manual", value=alt)
    else:
        code = 2
json.dump(state, open(path, "w"))
sys.stdout.write(out)
sys.exit(code)
'''

# Everything APT_PACKAGES and APT_BENCH_PACKAGES name except the MPIs,
# installed on every pretend machine.
OTHERS = ["build-essential", "ca-certificates", "pkg-config", "cmake", "python3", "python3-pytest",
          "iproute2", "gfortran", "libucx-dev", "libzmq3-dev"]


def machine(tmp_path, installed, uid=0, manual=None):
    """A pretend Debian with `installed` packages (their alternatives in
    auto mode, or set by hand to `manual`: group -> path)."""
    state = {"installed": OTHERS + installed, "groups": {}, "log": [], "uid": uid,
             "registers": {p: {g: list(v) for g, v in r.items()} for p, r in REGISTERS.items()}}
    for package in installed:
        for group, (alt, prio) in REGISTERS.get(package, {}).items():
            g = state["groups"].setdefault(group, {"mode": "auto", "alts": {}, "value": None})
            g["alts"][alt] = prio
            g["value"] = max(g["alts"], key=g["alts"].get)
    for group, alt in (manual or {}).items():
        state["groups"][group].update(mode="manual", value=alt)
    bindir = tmp_path / "stubs"
    bindir.mkdir()
    for tool in ("id", "dpkg-query", "apt-cache", "apt-get", "update-alternatives"):
        (bindir / tool).write_text(STUB.replace("PYTHON", sys.executable))
        (bindir / tool).chmod(0o755)
    (tmp_path / "state.json").write_text(json.dumps(state))
    return tmp_path


def deps_system(pretend):
    env = dict(os.environ, FAKE_DEBIAN=str(pretend / "state.json"),
               PATH=f"{pretend / 'stubs'}:{os.environ['PATH']}")
    proc = subprocess.run(["make", "--no-print-directory", "-s", "deps-system"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = json.loads((pretend / "state.json").read_text())
    return proc, state, {n: g["value"] for n, g in state["groups"].items()}


def calls(state, tool, *first):
    return [c[1:] for c in state["log"] if c[0] == tool and tuple(c[1:1 + len(first)]) == first]


def test_mpich_machine_keeps_mpich_as_its_mpi(tmp_path):
    proc, state, values = deps_system(machine(tmp_path, ["mpich", "libmpich-dev"]))
    assert calls(state, "apt-get", "install")[0][-2:] == ["openmpi-bin", "libopenmpi-dev"]
    assert set(state["groups"]["mpirun"]["alts"]) == {MPICH["mpirun"], OPENMPI["mpirun"]}
    assert values == MPICH, proc.stdout
    assert "make deps: update-alternatives --set mpirun /usr/bin/mpirun.mpich " \
           "(installing had made it /usr/bin/mpirun.openmpi)" in proc.stdout
    assert len(calls(state, "update-alternatives", "--quiet", "--set")) == 3


def test_fresh_machine_gets_mpich_as_its_mpi(tmp_path):
    """Nothing meant anything before: MPICH, installed in the same apt-get
    run as Open MPI (which outranks it), becomes the default."""
    proc, state, values = deps_system(machine(tmp_path, []))
    installed = calls(state, "apt-get", "install")[0]
    assert {"mpich", "libmpich-dev", "openmpi-bin", "libopenmpi-dev"} <= set(installed)
    assert values == MPICH, proc.stdout


def test_a_machine_set_to_open_mpi_stays_on_open_mpi(tmp_path):
    """Someone chose Open MPI by hand; installing MPICH beside it (lower
    priority) changes nothing and make deps sets nothing."""
    pretend = machine(tmp_path, ["openmpi-bin", "libopenmpi-dev"], manual=OPENMPI)
    proc, state, values = deps_system(pretend)
    assert calls(state, "apt-get", "install")[0][-2:] == ["mpich", "libmpich-dev"]
    assert values == OPENMPI
    assert calls(state, "update-alternatives", "--quiet", "--set") == []
    assert "update-alternatives" not in proc.stdout


def test_a_complete_machine_is_left_alone_silently(tmp_path):
    pretend = machine(tmp_path, ["mpich", "libmpich-dev", "openmpi-bin", "libopenmpi-dev"], manual=MPICH)
    proc, state, values = deps_system(pretend)
    assert (proc.stdout, proc.stderr) == ("", "")
    assert calls(state, "apt-get") == [] and calls(state, "update-alternatives", "--quiet") == []
    assert values == MPICH


def test_not_root_prints_the_commands_and_changes_nothing(tmp_path):
    proc, state, values = deps_system(machine(tmp_path, ["mpich", "libmpich-dev"], uid=1000))
    assert calls(state, "apt-get") == []
    assert values == {"mpi": MPICH["mpi"], "mpirun": MPICH["mpirun"], f"mpi-{ARCH}": MPICH[f"mpi-{ARCH}"]}
    assert "apt-get update && apt-get install -y openmpi-bin libopenmpi-dev" in proc.stderr
    for name in ("mpi", "mpirun"):
        assert f"  update-alternatives --set {name} {MPICH[name]}\n" in proc.stderr, proc.stderr

