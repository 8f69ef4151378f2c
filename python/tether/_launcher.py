"""`python -m tether run ...`: the native launcher `tether run` (DESIGN 3.9)
for a user who installed the package with pip.

The launcher is a native program built with the library (`make build` lays
it out as build/bin/tether, `make install` as PREFIX/bin/tether); the wheel
does not carry it. It is looked for, in this order, at:

1. `TETHER_LAUNCHER`, when set: the path of the launcher (an error if it
   is not an executable file; nothing else is tried);
2. `tether` on `PATH`;
3. build/bin/tether of the source checkout the package was installed from
   (`pip install <dir>` records the directory, PEP 610), or the one this
   module lies in (running from a checkout).

The launcher then replaces this process (`os.execv`), so that signals and
the exit code are the launcher's own."""

import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import List, NoReturn, Optional, Tuple
from urllib.parse import unquote, urlparse

LAUNCHER_VARIABLE = "TETHER_LAUNCHER"


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _checkouts() -> List[Path]:
    """Source directories the package may have been built from."""
    dirs: List[Path] = []
    try:
        text = metadata.distribution("tether").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text:
        try:
            url = urlparse(json.loads(text).get("url", ""))
        except ValueError:
            url = None
        if url is not None and url.scheme == "file":
            dirs.append(Path(unquote(url.path)))
    # python/tether/_launcher.py in a checkout: the checkout is two up.
    here = Path(__file__).resolve().parent.parent.parent
    if (here / "Cargo.toml").is_file() and here not in dirs:
        dirs.append(here)
    return dirs


def find() -> Tuple[Optional[str], List[str]]:
    """The launcher's path, or None and where it was looked for."""
    looked: List[str] = []
    given = os.environ.get(LAUNCHER_VARIABLE)
    if given:
        if _is_executable(Path(given)):
            return given, looked
        looked.append(f"{LAUNCHER_VARIABLE}={given} (not an executable file)")
        return None, looked
    looked.append(f"{LAUNCHER_VARIABLE} (not set)")
    on_path = shutil.which("tether")
    if on_path:
        return on_path, looked
    looked.append(f"PATH (no executable `tether` in {os.environ.get('PATH', '')!r})")
    for checkout in _checkouts():
        candidate = checkout / "build" / "bin" / "tether"
        if _is_executable(candidate):
            return str(candidate), looked
        looked.append(f"{candidate} (the checkout the package was built from; not there)")
    return None, looked


def run(args: List[str]) -> NoReturn:
    """Replaces this process by `tether run ARGS...`; exits with 127 and
    says where it looked when there is no launcher."""
    launcher, looked = find()
    if launcher is None:
        print(
            "python -m tether run: cannot find Tether's launcher `tether`; looked at:\n  "
            + "\n  ".join(looked)
            + "\nBuild it in the source checkout with `make build` (build/bin/tether) or install it with"
            " `make install PREFIX=DIR` and put DIR/bin on PATH, or set TETHER_LAUNCHER to its path.",
            file=sys.stderr,
        )
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(launcher, [launcher, "run", *args])
    except OSError as e:
        print(f"python -m tether run: cannot start {launcher}: {e}", file=sys.stderr)
        sys.exit(127)
