"""The settings table in docs/SETTINGS.md is the one `tether info` prints;
the README's first C example is the program it says it is."""

import re
import subprocess

from conftest import INCLUDE, LIB, ROOT, TETHER, clean_env, tether_run


def test_settings_doc_matches_tether_info(built):
    table = subprocess.run([str(TETHER), "info", "--markdown"], capture_output=True, text=True, check=True,
                           env=clean_env()).stdout
    assert table.strip() in (ROOT / "docs" / "SETTINGS.md").read_text(), \
        "docs/SETTINGS.md is stale: regenerate its table with `tether info --markdown`"


def test_info_shows_effective_values_and_warns_about_unknown_names(built):
    out = subprocess.run([str(TETHER), "info"], capture_output=True, text=True, check=True,
                         env=clean_env(TETHER_EAGER_LIMIT="1024", TETHER_EAGER_LIMT="1")).stdout
    assert "TETHER_EAGER_LIMIT = 1024 [environment, also a hint]" in out
    assert "transports:" in out and "tcp" in out
    assert "  shm      usable" in out, out
    assert "unknown setting TETHER_EAGER_LIMT" in out


def test_benchmarks_doc_names_every_json_key(built):
    import json

    proc = subprocess.run([str(TETHER), "bench", "barrier", "--json", "--baselines", "none", "--reps", "1",
                           "--iters", "2", "--warmup", "1"], capture_output=True, text=True, check=True,
                          env=clean_env())
    report = json.loads(proc.stdout)
    doc = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    keys = set(report) | set(report["machine"]) | set(report["series"][0]) | set(report["series"][0]["points"][0])
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/BENCHMARKS.md does not describe the JSON keys {missing}"


def test_readme_first_c_example_checks_every_call(built, tmp_path):
    """The first C block of the README compiles without warnings, works
    under the `tether run` line it gives, and run alone (or alone in its
    universe) exits non-zero with Tether's message, as the README says."""
    readme = (ROOT / "README.md").read_text()
    source = re.search(r"```c\n(.*?)```", readme, re.S).group(1)
    assert "CHECK(tether_init(&argc, &argv));" in source
    (tmp_path / "prog.c").write_text(source)
    prog = tmp_path / "prog"
    subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(INCLUDE), str(tmp_path / "prog.c"),
                    "-o", str(prog), "-L", str(LIB), "-ltether", f"-Wl,-rpath,{LIB}"], check=True)
    launch = re.search(r"tether run (--name sim -n 4 \./prog : --name ml -n 1 \./prog)\n", readme).group(1)
    proc = tether_run(launch.replace("./prog", str(prog)).split())
    assert "[sim:0] universe rank 1 of 5 got 21.5 from rank 0" in proc.stdout
    assert "[sim:0] universe rank 1 of 5 got 21.5 from rank 0" in readme

    alone = subprocess.run([str(prog)], capture_output=True, text=True, timeout=60, env=clean_env())
    assert alone.returncode != 0 and alone.stdout == ""
    assert "tether_init(&argc, &argv) failed: TETHER_ERR_INIT: no program name: set TETHER_PROGRAM" in alone.stderr
    assert "tether_init(&argc, &argv) failed: TETHER_ERR_INIT: no program name: set\nTETHER_PROGRAM" in readme

    solo = subprocess.run([str(prog)], capture_output=True, text=True, timeout=60, env=clean_env(TETHER_PROGRAM="sim"))
    assert solo.returncode != 0 and "failed: TETHER_ERR_RANK" in solo.stderr, solo.stderr
