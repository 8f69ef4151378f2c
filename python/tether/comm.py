"""`tether.Comm`: the native communicator plus the pickling methods.

Upper-case methods (`Send`, `Recv`, `Isend`, ...) are native: they move
the bytes of a buffer-protocol object without copying. The lower-case
methods here move any picklable object (`_objects` says how).
"""

import pickle
from array import array
from functools import reduce as _fold
from typing import Any, List, Optional, Sequence, Union

from . import _native, _objects, _reduce

IRECV_BUFSIZE = 32768
"""Default buffer size of `Comm.irecv` (as mpi4py's `irecv_bufsz`)."""


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


def _sizes(n: int) -> "array[int]":
    return array("q", bytes(8 * n))


class Comm(_native.Comm):
    """A group of universe processes with ranks 0..size-1 (`tether.UNIVERSE`
    holds them all)."""

    @classmethod
    def create(
        cls,
        programs: Optional[Sequence[Union[str, int]]] = None,
        ranks: Optional[Sequence[int]] = None,
    ) -> Optional["Comm"]:
        """A communicator of every joined process of `programs` (names or
        ids, ranked program by program in the order given), or of the
        universe ranks `ranks` (rank i is `ranks[i]`). Collective over
        those processes; a process outside them gets None at once."""
        if (programs is None) == (ranks is None):
            raise ValueError("Comm.create: give programs or ranks (one of them)")
        if programs is not None:
            ids = [p if isinstance(p, int) else _native.program_find(p) for p in programs]
            handle = _native.comm_create(ids)
        else:
            handle = _native.comm_create_ranks(list(ranks or []))
        return None if handle == _native.COMM_NULL else cls(handle)

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

    # --- collectives on objects (pickled in band; sizes travel first) ---

    def barrier(self) -> None:
        self.Barrier()

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """`root`'s object, on every process; large arrays go out of band."""
        if self.rank == root:
            parts = _objects.dumps(obj)
            sizes = array("q", [len(parts)] + [memoryview(p).nbytes for p in parts])
            count = array("q", [len(sizes)])
        else:
            count = _sizes(1)
        self.Bcast(count, root)
        if self.rank != root:
            sizes = _sizes(count[0])
        self.Bcast(sizes, root)
        if self.rank != root:
            parts = [bytearray(n) for n in sizes[1:]]
        for part in parts:
            self.Bcast(part, root)
        if self.rank == root:
            return obj
        if len(parts) == 1:
            return pickle.loads(parts[0])
        return _objects.loads_parts(parts[1:])

    def gather(self, obj: Any, root: int = 0) -> Optional[List[Any]]:
        """Every process's object, in rank order, at `root`; None elsewhere."""
        data = _pickled(obj)
        root_here = self.rank == root
        sizes = _sizes(self.size) if root_here else None
        self.Gather(array("q", [len(data)]), sizes, root)
        if not root_here:
            self.Gatherv(data, None, root)
            return None
        assert sizes is not None
        buf = bytearray(sum(sizes))
        self.Gatherv(data, (buf, list(sizes)), root)
        return _split(buf, sizes)

    def scatter(self, objs: Optional[Sequence[Any]], root: int = 0) -> Any:
        """Item r of `root`'s sequence `objs` (`None` elsewhere), on rank r."""
        size = _sizes(1)
        if self.rank == root:
            if objs is None or len(objs) != self.size:
                raise ValueError(f"scatter: root needs a sequence of {self.size} objects")
            datas = [_pickled(o) for o in objs]
            self.Scatter(array("q", [len(d) for d in datas]), size, root)
            buf = bytearray(size[0])
            self.Scatterv((b"".join(datas), [len(d) for d in datas]), buf, root)
        else:
            self.Scatter(None, size, root)
            buf = bytearray(size[0])
            self.Scatterv(None, buf, root)
        return pickle.loads(buf)

    def allgather(self, obj: Any) -> List[Any]:
        """Every process's object, in rank order, on every process."""
        data = _pickled(obj)
        sizes = _sizes(self.size)
        self.Allgather(array("q", [len(data)]), sizes)
        buf = bytearray(sum(sizes))
        self.Allgatherv(data, (buf, list(sizes)))
        return _split(buf, sizes)

    def alltoall(self, objs: Sequence[Any]) -> List[Any]:
        """Item r of every process's `objs` goes to rank r; returns what
        each rank sent here, in rank order."""
        if len(objs) != self.size:
            raise ValueError(f"alltoall: needs a sequence of {self.size} objects")
        datas = [_pickled(o) for o in objs]
        sizes = _sizes(self.size)
        self.Alltoall(array("q", [len(d) for d in datas]), sizes)
        buf = bytearray(sum(sizes))
        self.Alltoallv((b"".join(datas), [len(d) for d in datas]), (buf, list(sizes)))
        return _split(buf, sizes)

    def reduce(self, obj: Any, op: _reduce.Op = _native.SUM, root: int = 0) -> Any:
        """`op` (a tether operation or a function of two objects) folded
        over every process's object in rank order, at `root`; None elsewhere."""
        objs = self.gather(obj, root)
        return None if objs is None else _fold(_reduce.function(op), objs)

    def allreduce(self, obj: Any, op: _reduce.Op = _native.SUM) -> Any:
        """`reduce` whose result every process gets."""
        return _fold(_reduce.function(op), self.allgather(obj))


def _split(buf: bytearray, sizes: "array[int]") -> List[Any]:
    out, at, view = [], 0, memoryview(buf)
    for n in sizes:
        out.append(pickle.loads(view[at : at + n]))
        at += n
    return out
