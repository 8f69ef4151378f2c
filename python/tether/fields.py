"""Fields: a distributed array put by one program and got by others, step
after step, each side with its own decomposition (DESIGN 3.8, 3.11).

    dist = tether.Dist((512, 512), grid=(2, 2), kinds=(tether.DIST_BLOCK,) * 2)
    with tether.Field("temperature", np.float64, dist, peers="viz", mode="put") as f:
        for step in range(100):
            f.put(step, local)          # local.shape == dist.local_shape

Arrays must have the field's dtype, be contiguous in the dist's order (C:
last axis fastest, "F": first), and hold exactly the local element count;
otherwise `TypeError` (dtype) or `ValueError` (order, size) is raised
before anything is sent. A mismatch with the other program raises
`tether.FieldMismatchError`.
"""

from typing import Any, Optional, Sequence, Tuple

from . import _native

DIST_BLOCK = _native.DIST_BLOCK
DIST_CYCLIC = _native.DIST_CYCLIC
DIST_BLOCK_CYCLIC = _native.DIST_BLOCK_CYCLIC
DIST_NONE = _native.DIST_NONE

_ORDERS = {"C": _native.ORDER_C, "F": _native.ORDER_FORTRAN, "FORTRAN": _native.ORDER_FORTRAN}

# numpy dtype -> Tether datatype, by kind and size.
_DATATYPES = {
    ("f", 4): _native.FLOAT,
    ("f", 8): _native.DOUBLE,
    ("c", 8): _native.FLOAT_COMPLEX,
    ("c", 16): _native.DOUBLE_COMPLEX,
    ("i", 1): _native.INT8,
    ("i", 2): _native.INT16,
    ("i", 4): _native.INT32,
    ("i", 8): _native.INT64,
    ("u", 1): _native.UINT8,
    ("u", 2): _native.UINT16,
    ("u", 4): _native.UINT32,
    ("u", 8): _native.UINT64,
}


def _order(order: str) -> int:
    try:
        return _ORDERS[order.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"order {order!r} is neither 'C' nor 'F'") from None


def _datatype(dtype: Any) -> Tuple[Any, int]:
    import numpy as np

    dt = np.dtype(dtype)
    if not dt.isnative:
        raise TypeError(f"dtype {dt} is not in native byte order")
    key = (dt.kind, dt.itemsize)
    if key not in _DATATYPES:
        raise TypeError(f"dtype {dt} has no Tether datatype (numbers of 1 to 16 bytes)")
    return dt, _DATATYPES[key]


class Dist:
    """How a program lays a global array out over its processes: per
    dimension `DIST_BLOCK`, `DIST_CYCLIC`, `DIST_BLOCK_CYCLIC` (with
    `blocks[d]`) or `DIST_NONE`, over a process `grid` whose product is the
    program's joined processes. `order` is "C" or "F": how the local part
    is stored and how ranks map to grid coordinates."""

    def __init__(
        self,
        shape: Sequence[int],
        grid: Sequence[int],
        kinds: Sequence[int],
        blocks: Optional[Sequence[int]] = None,
        order: str = "C",
    ) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.order = "F" if _order(order) == _native.ORDER_FORTRAN else "C"
        blocks = [0] * len(self.shape) if blocks is None else [int(b) for b in blocks]
        self._handle = _native.dist_create(
            list(self.shape), [int(g) for g in grid], [int(k) for k in kinds], blocks, _order(order)
        )
        self._local_shape = tuple(_native.dist_local_shape(self._handle, len(self.shape)))

    @classmethod
    def boxes(
        cls,
        shape: Sequence[int],
        starts: Sequence[Sequence[int]],
        counts: Sequence[Sequence[int]],
        order: str = "C",
    ) -> "Dist":
        """This process's part as boxes (0-based `starts`, `counts` per
        box); the local array holds the boxes one after another."""
        self = cls.__new__(cls)
        self.shape = tuple(int(n) for n in shape)
        self.order = "F" if _order(order) == _native.ORDER_FORTRAN else "C"
        self._handle = _native.dist_create_boxes(
            list(self.shape),
            [[int(v) for v in b] for b in starts],
            [[int(v) for v in b] for b in counts],
            _order(order),
        )
        self._local_shape = tuple(_native.dist_local_shape(self._handle, len(self.shape)))
        return self

    @property
    def local_shape(self) -> Tuple[int, ...]:
        """This process's local extents (for several boxes only their
        product, the element count, is meaningful)."""
        return self._local_shape

    @property
    def local_size(self) -> int:
        size = 1
        for n in self._local_shape:
            size *= n
        return size

    def __del__(self) -> None:
        handle = getattr(self, "_handle", 0)
        if handle and _native.initialized():
            try:
                _native.dist_free(handle)
            except Exception:
                pass
        self._handle = 0


class Field:
    """Field `name` of `dtype` elements laid out by `dist`: `mode="put"`
    sends it to the programs in `peers` (a name or comma-separated names),
    `mode="get"` receives it from the producer named there. Creating it is
    collective over this program's processes."""

    def __init__(self, name: str, dtype: Any, dist: Dist, peers: Any, mode: str = "put") -> None:
        if mode not in ("put", "get"):
            raise ValueError(f"mode {mode!r} is neither 'put' nor 'get'")
        if not isinstance(peers, str):
            peers = ",".join(peers)
        self.name = name
        self.mode = mode
        self.dtype, datatype = _datatype(dtype)
        self._order = dist.order
        self._size = dist.local_size
        self._handle = 0
        self._handle = _native.field_create(
            name,
            datatype,
            dist._handle,
            peers,
            _native.FIELD_PUT if mode == "put" else _native.FIELD_GET,
        )

    def _check(self, array: Any, asked: str) -> Any:
        if self.mode != asked:
            raise ValueError(f"field {self.name!r} was made to {self.mode}, not to {asked}")
        if not self._handle:
            raise ValueError(f"field {self.name!r} was freed")
        dtype = getattr(array, "dtype", None)
        if dtype is None:
            raise TypeError(f"field {self.name!r}: expected a numpy array, got {type(array).__name__}")
        if dtype != self.dtype:
            raise TypeError(f"field {self.name!r}: array of {dtype}, the field holds {self.dtype}")
        if array.size != self._size:
            raise ValueError(
                f"field {self.name!r}: array of {array.size} elements, this process holds {self._size}"
            )
        flag = "C_CONTIGUOUS" if self._order == "C" else "F_CONTIGUOUS"
        if array.size > 1 and not array.flags[flag]:
            raise ValueError(
                f"field {self.name!r}: the array must be contiguous in {self._order} order"
            )
        return array

    def put(self, step: int, array: Any) -> None:
        """Puts step `step`: returns once it is queued (blocking while the
        producer is `FIELD_QUEUE` steps ahead of its slowest consumer)."""
        _native.field_step(self._handle, int(step), self._check(array, "put"), True)

    def get(self, step: int, array: Any) -> None:
        """Gets step `step` (the producer's next) into `array`."""
        _native.field_step(self._handle, int(step), self._check(array, "get"), False)

    def iput(self, step: int, array: Any) -> Any:
        """Starts putting; the Request holds `array` until it completes."""
        return _native.field_istep(self._handle, int(step), self._check(array, "put"), True)

    def iget(self, step: int, array: Any) -> Any:
        """Starts getting into `array`; the Request holds it until done."""
        return _native.field_istep(self._handle, int(step), self._check(array, "get"), False)

    def free(self) -> None:
        """Frees the field: a producer first delivers what is queued."""
        if self._handle:
            handle, self._handle = self._handle, 0
            _native.field_free(handle)

    def __enter__(self) -> "Field":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()
