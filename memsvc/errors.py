"""Domain errors: what went wrong, in words a person can act on.

Each error has a kind (which the rpc layer maps to a status code, in one
place) and a stable UPPER_SNAKE reason that clients can switch on. Must never
import grpc or protobuf: the domain knows nothing of the wire.
"""

from __future__ import annotations

import enum


class Kind(enum.Enum):
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    FAILED_PRECONDITION = "failed_precondition"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    UNAVAILABLE = "unavailable"
    UNAUTHENTICATED = "unauthenticated"
    INTERNAL = "internal"


class MemsvcError(Exception):
    kind: Kind = Kind.INTERNAL
    reason: str = "INTERNAL"

    def __init__(self, message: str, *, reason: str | None = None, metadata: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.metadata = metadata or {}


class InvalidArgument(MemsvcError):
    kind = Kind.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"


class NotFound(MemsvcError):
    kind = Kind.NOT_FOUND
    reason = "NOT_FOUND"


class FailedPrecondition(MemsvcError):
    kind = Kind.FAILED_PRECONDITION
    reason = "FAILED_PRECONDITION"


class ResourceExhausted(MemsvcError):
    kind = Kind.RESOURCE_EXHAUSTED
    reason = "RESOURCE_EXHAUSTED"


class Unavailable(MemsvcError):
    kind = Kind.UNAVAILABLE
    reason = "UNAVAILABLE"


class Unauthenticated(MemsvcError):
    kind = Kind.UNAUTHENTICATED
    reason = "INVALID_TOKEN"


class InvalidSetting(Exception):
    """A setting is wrong: raised before the server starts, never over the wire."""


def storage_error(exc: OSError, what: str) -> MemsvcError:
    """An OS error while writing becomes a retryable, typed domain error."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ResourceExhausted(f"disk full while {what}; nothing was stored, free space and retry",
                                 reason="DISK_FULL")
    return Unavailable(f"storage error while {what} ({exc.strerror}); nothing was stored, retry later",
                       reason="STORAGE_ERROR")
