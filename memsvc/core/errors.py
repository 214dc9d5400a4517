"""Domain errors: what went wrong, in words a person can act on.

Each error has a kind (which the rpc layer maps to a status code, in one
place) and a stable UPPER_SNAKE reason that clients can switch on. Must never
import grpc or protobuf: the domain knows nothing of the wire.
"""

from __future__ import annotations

import enum
import errno
import sqlite3


class Kind(enum.Enum):
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    FAILED_PRECONDITION = "failed_precondition"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    UNAVAILABLE = "unavailable"
    UNAUTHENTICATED = "unauthenticated"
    PERMISSION_DENIED = "permission_denied"
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


class AlreadyExists(MemsvcError):
    kind = Kind.ALREADY_EXISTS
    reason = "ALREADY_EXISTS"


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


class PermissionDenied(MemsvcError):
    kind = Kind.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class InvalidSetting(Exception):
    """A setting is wrong: raised before the server starts, never over the wire."""


def storage_error(exc: OSError | sqlite3.Error, what: str) -> MemsvcError:
    """A failed write (the OS's or SQLite's) becomes a typed domain error: a full disk is
    RESOURCE_EXHAUSTED `DISK_FULL`, anything else a retryable UNAVAILABLE `STORAGE_ERROR`."""
    if isinstance(exc, OSError):
        full, detail = exc.errno in (errno.ENOSPC, errno.EDQUOT), f" ({exc.strerror})"
    else:
        full, detail = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL, ""
    if full:
        return ResourceExhausted(f"disk full while {what}; nothing was stored, free space and retry",
                                 reason="DISK_FULL")
    return Unavailable(f"storage error while {what}{detail}; nothing was stored, retry later",
                       reason="STORAGE_ERROR")
