"""`python -m tether script.py [args]` (or `-m module [args]`, or `-c code`)
runs a program so that an exception escaping it ends the whole universe
(`tether.abort(1)`) after printing its traceback, even where the program
set its own `sys.excepthook` or joined through another library. This is
`python -m mpi4py`'s runner for Tether.

`python -m tether run --name NAME [-n N] CMD ... [: ...]` is the launcher,
`tether run` (see `tether._launcher` for where it is found); a script
called `run` is run as `python -m tether ./run`."""

import runpy
import sys
import traceback
from typing import List

from . import _native


def main(argv: List[str]) -> None:
    usage = (
        "usage: python -m tether (script.py | -m module | -c code) [args...]\n"
        "       python -m tether run --name NAME [-n N] [--env K=V]... CMD [ARGS...] [: ...]"
        "   (the launcher, tether run)"
    )
    if argv and argv[0] == "run":
        from ._launcher import run

        run(argv[1:])
    if not argv or argv[0] in ("-h", "--help"):
        print(usage, file=sys.stderr)
        sys.exit(0 if argv else 64)
    try:
        if argv[0] == "-m" and len(argv) > 1:
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c" and len(argv) > 1:
            sys.argv = ["-c", *argv[2:]]
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        if _native.initialized():
            _native.abort(1)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
