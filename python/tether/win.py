"""One-sided operations (DESIGN 3.7, 3.11): a window exposes a numpy
array (any writable, contiguous buffer) to the processes of a
communicator, which read and write it without the owner's involvement.

    a = np.zeros(1024)
    win = tether.Win(a, comm)           # collective; no copy of `a`
    win.Put(np.arange(4.0), target=1, offset=8 * 10)   # a[10:14] of rank 1
    win.Flush(1)                        # now in rank 1's memory
    win.Fence()                         # collective: everyone's puts are in `a`
    win.Free()                          # collective; `a` is released

Target offsets are in bytes, as in C (DESIGN 3.7), whatever the dtype:
element i of a float64 window is at 8 * i. `Put`/`Get` move the bytes of
the origin buffer; `Accumulate`, `Fetch_and_op` and `Compare_and_swap`
take the datatype from its dtype (or `datatype=`). Operations complete at
the next `Flush(target)`, `Flush_all()`, `Fence()` or `Free()`; until then
the window keeps their buffers alive. Details: docs/python.md.
"""

from types import TracebackType
from typing import Optional, Type

from . import _native


class Win(_native.Win):
    """A window over `array` for the members of `comm` (default
    `tether.UNIVERSE`). As a context manager, `Free` runs at the end of the
    `with` block (collective: every member must leave it)."""

    def __enter__(self) -> "Win":
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self.handle != _native.WIN_NULL:
            self.Free()
