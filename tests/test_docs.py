"""The settings table in docs/SETTINGS.md is the one `tether info` prints."""

import subprocess

from conftest import ROOT, TETHER, clean_env


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
