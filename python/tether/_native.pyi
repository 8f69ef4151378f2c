"""Type stubs of the native module `tether._native` (crates/tether-python)."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, final

from typing_extensions import disjoint_base

__all__ = [
    "Comm",
    "Win",
    "Request",
    "Status",
    "InPlaceType",
    "IN_PLACE",
    "comm_create",
    "comm_create_ranks",
    "init",
    "init_as",
    "finalize",
    "initialized",
    "abort",
    "universe_rank",
    "universe_size",
    "program_count",
    "program_id",
    "program_rank",
    "program_size",
    "program_name",
    "program_find",
    "program_universe_rank",
    "hint",
    "hint_get",
    "stats",
    "error_string",
    "progress",
    "am_register",
    "type_size",
    "SUCCESS",
    "ANY_SOURCE",
    "ANY_TAG",
    "TAG_UB",
    "UNDEFINED",
    "COMM_UNIVERSE",
    "REQUEST_NULL",
    "ERR_ARG",
    "ERR_COUNT",
    "ERR_RANK",
    "ERR_TAG",
    "ERR_COMM",
    "ERR_TYPE",
    "ERR_OP",
    "ERR_REQUEST",
    "ERR_TRUNCATE",
    "ERR_NOT_INITIALIZED",
    "ERR_INIT",
    "ERR_TIMEOUT",
    "ERR_PEER_LOST",
    "ERR_PROTOCOL",
    "ERR_AUTH",
    "ERR_TRANSPORT",
    "ERR_UNKNOWN_HINT",
    "ERR_HINT_VALUE",
    "ERR_RMA_RANGE",
    "ERR_FIELD_MISMATCH",
    "ERR_NO_MEM",
    "ERR_FILE",
    "ERR_CANCELLED",
    "ERR_INTERNAL",
    "BYTE",
    "CHAR",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT",
    "LONG",
    "LONG_LONG",
    "FLOAT",
    "DOUBLE",
    "FLOAT_COMPLEX",
    "DOUBLE_COMPLEX",
    "FLOAT_INT",
    "DOUBLE_INT",
    "TWO_INT",
    "COMM_NULL",
    "SUM",
    "PROD",
    "MIN",
    "MAX",
    "LAND",
    "LOR",
    "LXOR",
    "BAND",
    "BOR",
    "BXOR",
    "MINLOC",
    "MAXLOC",
    "REPLACE",
    "NO_OP",
    "WIN_NULL",
    "DIST_BLOCK",
    "DIST_CYCLIC",
    "DIST_BLOCK_CYCLIC",
    "DIST_NONE",
    "ORDER_C",
    "ORDER_FORTRAN",
    "FIELD_PUT",
    "FIELD_GET",
    "dist_create",
    "dist_create_boxes",
    "dist_local_shape",
    "dist_free",
    "field_create",
    "field_step",
    "field_istep",
    "field_free",
]

SUCCESS: int
ANY_SOURCE: int
ANY_TAG: int
TAG_UB: int
UNDEFINED: int
COMM_UNIVERSE: int
REQUEST_NULL: int
ERR_ARG: int
ERR_COUNT: int
ERR_RANK: int
ERR_TAG: int
ERR_COMM: int
ERR_TYPE: int
ERR_OP: int
ERR_REQUEST: int
ERR_TRUNCATE: int
ERR_NOT_INITIALIZED: int
ERR_INIT: int
ERR_TIMEOUT: int
ERR_PEER_LOST: int
ERR_PROTOCOL: int
ERR_AUTH: int
ERR_TRANSPORT: int
ERR_UNKNOWN_HINT: int
ERR_HINT_VALUE: int
ERR_RMA_RANGE: int
ERR_FIELD_MISMATCH: int
ERR_NO_MEM: int
ERR_FILE: int
ERR_CANCELLED: int
ERR_INTERNAL: int
BYTE: int
CHAR: int
INT8: int
INT16: int
INT32: int
INT64: int
UINT8: int
UINT16: int
UINT32: int
UINT64: int
INT: int
LONG: int
LONG_LONG: int
FLOAT: int
DOUBLE: int
FLOAT_COMPLEX: int
DOUBLE_COMPLEX: int
FLOAT_INT: int
DOUBLE_INT: int
TWO_INT: int
COMM_NULL: int
SUM: int
PROD: int
MIN: int
MAX: int
LAND: int
LOR: int
LXOR: int
BAND: int
BOR: int
BXOR: int
MINLOC: int
MAXLOC: int
REPLACE: int
NO_OP: int
WIN_NULL: int
DIST_BLOCK: int
DIST_CYCLIC: int
DIST_BLOCK_CYCLIC: int
DIST_NONE: int
ORDER_C: int
ORDER_FORTRAN: int
FIELD_PUT: int
FIELD_GET: int

def dist_create(shape: List[int], grid: List[int], kinds: List[int], blocks: List[int], order: int) -> int: ...
def dist_create_boxes(shape: List[int], starts: List[List[int]], counts: List[List[int]], order: int) -> int: ...
def dist_local_shape(dist: int, ndims: int) -> List[int]: ...
def dist_free(dist: int) -> None: ...
def field_create(name: str, datatype: int, dist: int, peers: str, mode: int) -> int: ...
def field_step(field: int, step: int, array: Any, put: bool) -> None: ...
def field_istep(field: int, step: int, array: Any, put: bool) -> Request: ...
def field_free(field: int) -> None: ...

@final
class InPlaceType: ...

IN_PLACE: InPlaceType

_Buffer = Any
"""Any object with the buffer protocol (numpy array, bytearray, memoryview, ...)."""
_CollBuffer = Union[_Buffer, InPlaceType]
_VBuffer = Union[Tuple[_Buffer, Sequence[int]], Tuple[_Buffer, Sequence[int], Optional[Sequence[int]]]]

@final
class Status:
    @property
    def source(self) -> int: ...
    @property
    def tag(self) -> int: ...
    @property
    def error(self) -> int: ...
    @property
    def count(self) -> int: ...
    def Get_source(self) -> int: ...
    def Get_tag(self) -> int: ...
    def Get_error(self) -> int: ...
    def Get_count(self, datatype: int = ...) -> int: ...

@final
class Request:
    def wait(self) -> Any: ...
    def test(self) -> Tuple[bool, Optional[Any]]: ...
    def cancel(self) -> None: ...
    @property
    def active(self) -> bool: ...
    @staticmethod
    def waitall(requests: List[Request]) -> List[Any]: ...
    @staticmethod
    def waitany(requests: List[Request]) -> Tuple[int, Optional[Any]]: ...
    @staticmethod
    def testall(requests: List[Request]) -> Tuple[bool, Optional[List[Any]]]: ...

@disjoint_base
class Comm:
    def __new__(cls, handle: int) -> Comm: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    @property
    def handle(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    def Get_rank(self) -> int: ...
    def Get_size(self) -> int: ...
    def universe_rank(self, rank: int) -> int: ...
    def Send(self, buf: _Buffer, dest: int, tag: int = 0) -> None: ...
    def Recv(self, buf: _Buffer, source: int = ..., tag: int = ...) -> Status: ...
    def Isend(self, buf: _Buffer, dest: int, tag: int = 0) -> Request: ...
    def Irecv(self, buf: _Buffer, source: int = ..., tag: int = ...) -> Request: ...
    def Probe(self, source: int = ..., tag: int = ...) -> Status: ...
    def Iprobe(self, source: int = ..., tag: int = ...) -> Optional[Status]: ...
    def free(self) -> None: ...
    def am_send(
        self, dest: int, id: int, header: Optional[_Buffer] = None, payload: Optional[_Buffer] = None
    ) -> Optional[Request]: ...
    def Barrier(self) -> None: ...
    def Ibarrier(self) -> Request: ...
    def Bcast(self, buf: _Buffer, root: int = 0) -> None: ...
    def Ibcast(self, buf: _Buffer, root: int = 0) -> Request: ...
    def Reduce(
        self,
        sendbuf: _CollBuffer,
        recvbuf: Optional[_Buffer],
        op: int = ...,
        root: int = 0,
        datatype: Optional[int] = None,
    ) -> None: ...
    def Ireduce(
        self,
        sendbuf: _CollBuffer,
        recvbuf: Optional[_Buffer],
        op: int = ...,
        root: int = 0,
        datatype: Optional[int] = None,
    ) -> Request: ...
    def Allreduce(
        self, sendbuf: _CollBuffer, recvbuf: _Buffer, op: int = ..., datatype: Optional[int] = None
    ) -> None: ...
    def Iallreduce(
        self, sendbuf: _CollBuffer, recvbuf: _Buffer, op: int = ..., datatype: Optional[int] = None
    ) -> Request: ...
    def Reduce_scatter_block(
        self, sendbuf: _CollBuffer, recvbuf: _Buffer, op: int = ..., datatype: Optional[int] = None
    ) -> None: ...
    def Ireduce_scatter_block(
        self, sendbuf: _CollBuffer, recvbuf: _Buffer, op: int = ..., datatype: Optional[int] = None
    ) -> Request: ...
    def Gather(self, sendbuf: _CollBuffer, recvbuf: Optional[_Buffer], root: int = 0) -> None: ...
    def Igather(self, sendbuf: _CollBuffer, recvbuf: Optional[_Buffer], root: int = 0) -> Request: ...
    def Gatherv(self, sendbuf: _CollBuffer, recvbuf: Optional[_VBuffer], root: int = 0) -> None: ...
    def Igatherv(self, sendbuf: _CollBuffer, recvbuf: Optional[_VBuffer], root: int = 0) -> Request: ...
    def Scatter(self, sendbuf: Optional[_Buffer], recvbuf: _CollBuffer, root: int = 0) -> None: ...
    def Iscatter(self, sendbuf: Optional[_Buffer], recvbuf: _CollBuffer, root: int = 0) -> Request: ...
    def Scatterv(self, sendbuf: Optional[_VBuffer], recvbuf: _CollBuffer, root: int = 0) -> None: ...
    def Iscatterv(self, sendbuf: Optional[_VBuffer], recvbuf: _CollBuffer, root: int = 0) -> Request: ...
    def Allgather(self, sendbuf: _CollBuffer, recvbuf: _Buffer) -> None: ...
    def Iallgather(self, sendbuf: _CollBuffer, recvbuf: _Buffer) -> Request: ...
    def Allgatherv(self, sendbuf: _CollBuffer, recvbuf: _VBuffer) -> None: ...
    def Iallgatherv(self, sendbuf: _CollBuffer, recvbuf: _VBuffer) -> Request: ...
    def Alltoall(self, sendbuf: _CollBuffer, recvbuf: _Buffer) -> None: ...
    def Ialltoall(self, sendbuf: _CollBuffer, recvbuf: _Buffer) -> Request: ...
    def Alltoallv(self, sendbuf: _VBuffer, recvbuf: _VBuffer) -> None: ...
    def Ialltoallv(self, sendbuf: _VBuffer, recvbuf: _VBuffer) -> Request: ...
    def _isend_parts(self, bufs: Sequence[_Buffer], dest: int, tag: int) -> Request: ...
    def _irecv_then(
        self, buf: _Buffer, source: int, tag: int, finish: Callable[[Status], Any]
    ) -> Request: ...

@disjoint_base
class Win:
    def __new__(cls, array: _Buffer, comm: Optional[Comm] = None) -> Win: ...
    @property
    def handle(self) -> int: ...
    @property
    def array(self) -> Optional[Any]: ...
    def Put(self, origin: _Buffer, target: int, offset: int = 0) -> None: ...
    def Get(self, origin: _Buffer, target: int, offset: int = 0) -> None: ...
    def Rput(self, origin: _Buffer, target: int, offset: int = 0) -> Request: ...
    def Rget(self, origin: _Buffer, target: int, offset: int = 0) -> Request: ...
    def Accumulate(
        self, origin: _Buffer, target: int, offset: int = 0, op: int = ..., datatype: Optional[int] = None
    ) -> None: ...
    def Fetch_and_op(
        self,
        origin: Optional[_Buffer],
        result: _Buffer,
        target: int,
        offset: int = 0,
        op: int = ...,
        datatype: Optional[int] = None,
    ) -> None: ...
    def Compare_and_swap(
        self,
        origin: _Buffer,
        compare: _Buffer,
        result: _Buffer,
        target: int,
        offset: int = 0,
        datatype: Optional[int] = None,
    ) -> None: ...
    def Flush(self, target: int) -> None: ...
    def Flush_all(self) -> None: ...
    def Fence(self) -> None: ...
    def Free(self) -> None: ...

def comm_create(ids: List[int]) -> int: ...
def comm_create_ranks(ranks: List[int]) -> int: ...
def init() -> None: ...
def init_as(program: str, rank: int, size: int) -> None: ...
def finalize() -> None: ...
def initialized() -> bool: ...
def abort(code: int = 1) -> None: ...
def universe_rank() -> int: ...
def universe_size() -> int: ...
def program_count() -> int: ...
def program_id() -> int: ...
def program_rank() -> int: ...
def program_size(id: int) -> int: ...
def program_name(id: int) -> str: ...
def program_find(name: str) -> int: ...
def program_universe_rank(id: int, rank: int) -> int: ...
def hint(key: str, value: str) -> None: ...
def stats() -> Dict[str, int]: ...
def hint_get(key: str) -> str: ...
def error_string(code: int) -> str: ...
def progress() -> None: ...
def am_register(id: int, handler: Optional[Callable[[int, bytes, bytes], object]]) -> None: ...
def type_size(datatype: int) -> int: ...
