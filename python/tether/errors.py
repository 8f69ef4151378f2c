"""Tether's errors as exceptions: one class per C error class.

Every failing call raises a subclass of `TetherError`, whose `code` is the
C error code (`tether.ERR_TRUNCATE`, ...) and whose message is the detailed
one the C layer gives (`tether_last_error`: which peer, which size,
expected against received). Where an operation completed in error (a
truncated receive), `status` is its `Status` (the true size is
`status.count`); otherwise `status` is None.

Some classes also derive from the built-in exception a Python programmer
would catch: `TimeoutError` from `builtins.TimeoutError`, `PeerLostError`
from `ConnectionError`, the argument errors from `ValueError`.
"""

import builtins
from typing import Any, Dict, Optional, Type

from . import _native


class TetherError(Exception):
    """A Tether call failed; `code` says how, `message` says exactly what."""

    code: int
    message: str
    status: Optional[Any]

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.status = None

    def __str__(self) -> str:
        # The detailed message starts with the class name already.
        return self.message or _native.error_string(self.code)


class ArgError(TetherError, ValueError):
    """An invalid argument (TETHER_ERR_ARG)."""


class CountError(TetherError, ValueError):
    """An invalid count (TETHER_ERR_COUNT)."""


class RankError(TetherError, ValueError):
    """A rank outside the communicator (TETHER_ERR_RANK)."""


class TagError(TetherError, ValueError):
    """An invalid tag (TETHER_ERR_TAG)."""


class CommError(TetherError):
    """An invalid communicator (TETHER_ERR_COMM)."""


class DatatypeError(TetherError):
    """An invalid datatype (TETHER_ERR_TYPE)."""


class OpError(TetherError):
    """An invalid reduction, or one the datatype does not support (TETHER_ERR_OP)."""


class RequestError(TetherError):
    """An invalid request (TETHER_ERR_REQUEST)."""


class TruncateError(TetherError):
    """A message longer than the receive buffer (TETHER_ERR_TRUNCATE);
    `status.count` is its true size."""


class NotInitializedError(TetherError):
    """Called before `tether.init` or after `tether.finalize` (TETHER_ERR_NOT_INITIALIZED)."""


class InitError(TetherError):
    """Joining the universe failed (TETHER_ERR_INIT)."""


class TimeoutError(TetherError, builtins.TimeoutError):
    """A peer did not appear or answer in time (TETHER_ERR_TIMEOUT)."""


class PeerLostError(TetherError, ConnectionError):
    """A peer process went away (TETHER_ERR_PEER_LOST)."""


class ProtocolError(TetherError):
    """A peer sent something the wire protocol forbids (TETHER_ERR_PROTOCOL)."""


class AuthError(TetherError):
    """A peer failed authentication (TETHER_ERR_AUTH)."""


class TransportError(TetherError):
    """A transport failed (TETHER_ERR_TRANSPORT)."""


class UnknownHintError(TetherError):
    """No such hint (TETHER_ERR_UNKNOWN_HINT)."""


class HintValueError(TetherError, ValueError):
    """A value the hint does not accept (TETHER_ERR_HINT_VALUE)."""


class RmaRangeError(TetherError):
    """A one-sided access outside the window (TETHER_ERR_RMA_RANGE)."""


class FieldMismatchError(TetherError):
    """The two sides of a field disagree (TETHER_ERR_FIELD_MISMATCH)."""


class NoMemError(TetherError):
    """Out of memory (TETHER_ERR_NO_MEM)."""


class FileError(TetherError):
    """A file operation failed (TETHER_ERR_FILE)."""


class CancelledError(TetherError):
    """The operation was cancelled (TETHER_ERR_CANCELLED)."""


class InternalError(TetherError):
    """A bug in Tether (TETHER_ERR_INTERNAL): please report it."""


by_code: Dict[int, Type[TetherError]] = {
    _native.ERR_ARG: ArgError,
    _native.ERR_COUNT: CountError,
    _native.ERR_RANK: RankError,
    _native.ERR_TAG: TagError,
    _native.ERR_COMM: CommError,
    _native.ERR_TYPE: DatatypeError,
    _native.ERR_OP: OpError,
    _native.ERR_REQUEST: RequestError,
    _native.ERR_TRUNCATE: TruncateError,
    _native.ERR_NOT_INITIALIZED: NotInitializedError,
    _native.ERR_INIT: InitError,
    _native.ERR_TIMEOUT: TimeoutError,
    _native.ERR_PEER_LOST: PeerLostError,
    _native.ERR_PROTOCOL: ProtocolError,
    _native.ERR_AUTH: AuthError,
    _native.ERR_TRANSPORT: TransportError,
    _native.ERR_UNKNOWN_HINT: UnknownHintError,
    _native.ERR_HINT_VALUE: HintValueError,
    _native.ERR_RMA_RANGE: RmaRangeError,
    _native.ERR_FIELD_MISMATCH: FieldMismatchError,
    _native.ERR_NO_MEM: NoMemError,
    _native.ERR_FILE: FileError,
    _native.ERR_CANCELLED: CancelledError,
    _native.ERR_INTERNAL: InternalError,
}
"""The exception class of each error code (used by the native module)."""
