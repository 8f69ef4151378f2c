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
