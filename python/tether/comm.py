"""`tether.Comm`: the native communicator plus the pickling methods.

Upper-case methods (`Send`, `Recv`, `Isend`, ...) are native: they move
the bytes of a buffer-protocol object without copying. The lower-case
methods here move any picklable object (`_objects` says how).
"""

from typing import Any, Optional

from . import _native, _objects

IRECV_BUFSIZE = 32768
"""Default buffer size of `Comm.irecv` (as mpi4py's `irecv_bufsz`)."""


class Comm(_native.Comm):
    """A group of universe processes with ranks 0..size-1 (`tether.UNIVERSE`
    holds them all)."""

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object to rank `dest`; returns when the
        object's memory may be reused."""
        parts = _objects.dumps(obj)
        if len(parts) == 1:
            self.Send(parts[0], dest, tag)
        else:
            self._isend_parts(parts, dest, tag).wait()

    def recv(self, source: int = _native.ANY_SOURCE, tag: int = _native.ANY_TAG) -> Any:
        """Receives an object of any size from `source` with `tag`
        (wildcards allowed)."""
        return _objects.recv(self, source, tag)

    def isend(self, obj: Any, dest: int, tag: int = 0) -> _native.Request:
        """Starts sending a picklable object; the request keeps the pickle
        and the object's out-of-band buffers alive until it completes."""
        return self._isend_parts(_objects.dumps(obj), dest, tag)

    def irecv(
        self,
        buf: Optional[Any] = None,
        source: int = _native.ANY_SOURCE,
        tag: int = _native.ANY_TAG,
    ) -> _native.Request:
        """Posts a receive of an object; `wait()` returns the object.

        The message is matched when it arrives, in order with every other
        receive, so its size is not known in advance: the first message
        goes into `buf` (a writable buffer, default a new bytearray of
        `IRECV_BUFSIZE` bytes) and a longer one raises `TruncateError`, as
        in mpi4py. Objects sent with out-of-band buffers (large arrays)
        need only room for their small manifest."""
        if buf is None:
            buf = bytearray(IRECV_BUFSIZE)
        return self._irecv_then(buf, source, tag, _objects.finisher(self, buf))
