"""Reduction operations on Python objects (the lower-case `reduce` and
`allreduce`): each `tether` operation code as a Python function, as
mpi4py applies `MPI.SUM` & co. to objects. Any callable of two arguments
may be given instead."""

import operator
from typing import Any, Callable, Union

from . import _native

Op = Union[int, Callable[[Any, Any], Any]]


def _minloc(a: Any, b: Any) -> Any:
    return min(a, b, key=lambda pair: (pair[0], pair[1]))


def _maxloc(a: Any, b: Any) -> Any:
    return min(a, b, key=lambda pair: (-pair[0], pair[1]))


FUNCTIONS = {
    _native.SUM: operator.add,
    _native.PROD: operator.mul,
    _native.MIN: lambda a, b: min(a, b),
    _native.MAX: lambda a, b: max(a, b),
    _native.LAND: lambda a, b: bool(a) and bool(b),
    _native.LOR: lambda a, b: bool(a) or bool(b),
    _native.LXOR: lambda a, b: bool(a) != bool(b),
    _native.BAND: operator.and_,
    _native.BOR: operator.or_,
    _native.BXOR: operator.xor,
    _native.MINLOC: _minloc,
    _native.MAXLOC: _maxloc,
}


def function(op: Op) -> Callable[[Any, Any], Any]:
    """The Python function for `op` (an operation code or a callable)."""
    if callable(op):
        return op
    try:
        return FUNCTIONS[op]
    except KeyError:
        raise ValueError(f"unknown reduction operation {op!r}") from None
