"""How a Python object travels: pickle protocol 5, large buffers out of band.

An object becomes one message when pickling it yields no out-of-band
buffer (`pickle.dumps` output, which starts with the protocol-5 opcode
0x80 0x05). Otherwise it is sent as 2 + n messages to the same destination
with the same tag, which MPI's non-overtaking rule keeps in order:

  1. a manifest: b"TPK5", u32 n, u64 size of the pickle, n x u64 sizes of
     the buffers (little-endian);
  2. the pickle, whose out-of-band buffers are left out;
  3. each buffer, sent straight from the object's memory (a contiguous
     numpy array is never copied on the sending side) and received into
     its own bytearray, which the unpickled object then uses (no second
     copy on the receiving side either).

This is the scheme of mpi4py.util.pkl5, with the manifest telling the
receiver how much to allocate for each part.
"""

import pickle
import struct
from typing import Any, Callable, List, Sequence, Union

from . import _native

MAGIC = b"TPK5"
_HEAD = struct.Struct("<4sI")

Part = Union[bytes, bytearray, memoryview]


def dumps(obj: Any) -> List[Part]:
    """The messages that carry `obj`, in sending order."""
    buffers: List[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    if not buffers:
        return [data]
    try:
        raws = [b.raw() for b in buffers]
    except BufferError:
        # A non-contiguous out-of-band buffer: carry everything in band.
        return [pickle.dumps(obj, protocol=5)]
    sizes = [len(data)] + [r.nbytes for r in raws]
    manifest = _HEAD.pack(MAGIC, len(raws)) + struct.pack(f"<{len(sizes)}Q", *sizes)
    return [manifest, data, *raws]


def is_manifest(head: Part) -> bool:
    return bytes(head[:4]) == MAGIC


def part_sizes(manifest: Part) -> Sequence[int]:
    """Sizes of the pickle and of each out-of-band buffer."""
    _, n = _HEAD.unpack_from(manifest, 0)
    return struct.unpack_from(f"<{n + 1}Q", manifest, _HEAD.size)


def loads_parts(parts: Sequence[Part]) -> Any:
    return pickle.loads(parts[0], buffers=parts[1:])


def finish(
    comm: "_native.Comm", head: Part, status: "_native.Status"
) -> Any:
    """The object whose first message `head` came with `status`: unpickled
    at once, or, after a manifest, once the remaining parts have arrived
    from the same source with the same tag."""
    if not is_manifest(head):
        return pickle.loads(head)
    parts = [bytearray(n) for n in part_sizes(head)]
    reqs = [comm.Irecv(p, status.source, status.tag) for p in parts]
    _native.Request.waitall(reqs)
    return loads_parts(parts)


def recv(comm: "_native.Comm", source: int, tag: int) -> Any:
    """Receives one object: probes for its first message to size the buffer."""
    status = comm.Probe(source, tag)
    head = bytearray(status.count)
    status = comm.Recv(head, status.source, status.tag)
    return finish(comm, head, status)


def finisher(comm: "_native.Comm", buf: Part) -> Callable[["_native.Status"], Any]:
    """What an object receive into `buf` does once its first message is in."""

    def done(status: "_native.Status") -> Any:
        return finish(comm, memoryview(buf)[: status.count], status)

    return done

