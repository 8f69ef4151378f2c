"""Tether for Python: couple separate programs with an MPI-shaped API.

    import tether, numpy as np
    tether.init()                      # identity from `tether run` / the environment
    comm = tether.UNIVERSE
    if comm.rank == 0:
        comm.Send(np.arange(4.0), dest=1, tag=7)       # buffers: no copy
        comm.send({"step": 1}, dest=1)                 # objects: pickled
    elif comm.rank == 1:
        a = np.empty(4); status = comm.Recv(a, source=0, tag=7)
        obj = comm.recv(source=0)

Conventions are mpi4py's: upper-case methods take buffer-protocol objects
(numpy arrays first) and never copy them; lower-case methods take any
picklable object. Errors raise `TetherError` subclasses (`tether.errors`).
`init` arranges `finalize` at exit and, when an exception escapes the
program, `abort` of the whole run (so no other rank waits forever).
Details: docs/python.md.
"""

import atexit
import contextlib
import sys
import types
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Union

from . import _native
from ._native import (
    SUCCESS,
    ANY_SOURCE,
    ANY_TAG,
    TAG_UB,
    UNDEFINED,
    COMM_UNIVERSE,
    REQUEST_NULL,
    ERR_ARG,
    ERR_COUNT,
    ERR_RANK,
    ERR_TAG,
    ERR_COMM,
    ERR_TYPE,
    ERR_OP,
    ERR_REQUEST,
    ERR_TRUNCATE,
    ERR_NOT_INITIALIZED,
    ERR_INIT,
    ERR_TIMEOUT,
    ERR_PEER_LOST,
    ERR_PROTOCOL,
    ERR_AUTH,
    ERR_TRANSPORT,
    ERR_UNKNOWN_HINT,
    ERR_HINT_VALUE,
    ERR_RMA_RANGE,
    ERR_FIELD_MISMATCH,
    ERR_NO_MEM,
    ERR_FILE,
    ERR_CANCELLED,
    ERR_INTERNAL,
    BYTE,
    CHAR,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    INT,
    LONG,
    LONG_LONG,
    FLOAT,
    DOUBLE,
    FLOAT_COMPLEX,
    DOUBLE_COMPLEX,
    FLOAT_INT,
    DOUBLE_INT,
    TWO_INT,
    COMM_NULL,
    SUM,
    PROD,
    MIN,
    MAX,
    LAND,
    LOR,
    LXOR,
    BAND,
    BOR,
    BXOR,
    MINLOC,
    MAXLOC,
    REPLACE,
    NO_OP,
    WIN_NULL,
    IN_PLACE,
    InPlaceType,
    Request,
    Status,
    abort,
    am_register,
    error_string,
    finalize,
    hint,
    hint_get,
    initialized,
    program_count,
    program_find,
    program_id,
    program_name,
    program_rank,
    program_size,
    progress,
    stats,
    type_size,
    universe_rank,
    universe_size,
)
from .comm import Comm
from .win import Win
from .fields import DIST_BLOCK, DIST_BLOCK_CYCLIC, DIST_CYCLIC, DIST_NONE, Dist, Field
from .errors import *  # noqa: F401,F403  (TetherError and one class per error code)

UNIVERSE = Comm(_native.COMM_UNIVERSE)
"""Every process of every program that joined."""


class Program(NamedTuple):
    """A program of the universe: its name, id (index by name order) and
    number of joined processes."""

    name: str
    id: int
    size: int

    def universe_rank(self, rank: int) -> int:
        """The universe rank of rank `rank` of this program
        (`program_universe_rank`)."""
        return _native.program_universe_rank(self.id, rank)


_hooks_installed = False
_previous_excepthook: Optional[Callable[..., Any]] = None


def init(
    program: Optional[str] = None,
    rank: Optional[int] = None,
    size: Optional[int] = None,
    *,
    abort_on_exception: bool = True,
) -> None:
    """Joins the universe: with the identity from the environment (what
    `tether run` sets), or as rank `rank` of `program` of `size` joining
    processes. Waits (without the GIL) until the universe is complete.

    `finalize` then runs at exit. With `abort_on_exception` (default), an
    exception that escapes the program is printed and ends the whole
    universe with exit code 1 (`tether.abort`), as `python -m mpi4py` does,
    instead of leaving the other processes waiting for this one."""
    # Under `tether run` without -n, joining moves stdout and stderr to the
    # launcher's output relay (labelled with the rank): what was printed
    # before goes out first, where it was meant to.
    sys.stdout.flush()
    sys.stderr.flush()
    if program is None:
        if rank is not None or size is not None:
            raise ValueError("init: rank and size need program")
        _native.init()
    else:
        if rank is None or size is None:
            raise ValueError("init: program needs rank and size")
        _native.init_as(program, rank, size)
    _install_hooks(abort_on_exception)


def _install_hooks(abort_on_exception: bool) -> None:
    global _hooks_installed, _previous_excepthook
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_finalize_at_exit)
    if abort_on_exception:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


def _finalize_at_exit() -> None:
    if initialized():
        finalize()


def _abort_on_uncaught(
    kind: type, value: BaseException, tb: Optional[types.TracebackType]
) -> None:
    (_previous_excepthook or sys.__excepthook__)(kind, value, tb)
    if initialized():
        # abort ends the process at once: nothing buffered would be written.
        sys.stdout.flush()
        sys.stderr.flush()
        abort(1)


def programs() -> List[Program]:
    """Every program of the universe, in id (name) order."""
    return [
        Program(_native.program_name(i), i, _native.program_size(i))
        for i in range(_native.program_count())
    ]


def program_universe_rank(program: Union[str, int], rank: int) -> int:
    """The universe rank of rank `rank` of `program` (its name or id):
    programs are ordered by name and their ranks concatenated. `ArgError`
    for an unknown program, `RankError` for a rank outside it. (The
    caller's own universe rank is `universe_rank()`.)"""
    if isinstance(program, str):
        program = _native.program_find(program)
    elif not isinstance(program, int) or isinstance(program, bool):
        raise TypeError(
            "program_universe_rank: program must be a name (str) or an id (int),"
            f" not {type(program).__name__}"
        )
    return _native.program_universe_rank(program, rank)


@contextlib.contextmanager
def kernel() -> Iterator[None]:
    """A kernel region (hint `IN_KERNEL`): peers used inside get fast,
    persistent connections and waits poll longer."""
    _native.hint("IN_KERNEL", "1")
    try:
        yield
    finally:
        _native.hint("IN_KERNEL", "0")

