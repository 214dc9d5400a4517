"""Domain errors: what went wrong, in words a person can act on.

Each error has a kind (which the rpc layer maps to a status code, in one
place) and a stable reason from the catalogue (reasons.py) that clients can
switch on; the reason must be of the error's kind. Must never import grpc or
protobuf: the domain knows nothing of the wire.
"""

from __future__ import annotations

import errno
import sqlite3

from memsvc.core.reasons import Kind, Reason


class MemsvcError(Exception):
    kind: Kind = Kind.INTERNAL
    reason: Reason = Reason.INTERNAL

    def __init__(self, message: str, *, reason: Reason | None = None, metadata: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if self.reason.kind is not self.kind:  # the catalogue gives each reason one status: a bug of ours
            raise TypeError(f"reason {self.reason} is {self.reason.kind.name}, not {self.kind.name}")
        self.metadata = metadata or {}


class InvalidArgument(MemsvcError):
    kind = Kind.INVALID_ARGUMENT
    reason = Reason.INVALID_ARGUMENT


class NotFound(MemsvcError):
    kind = Kind.NOT_FOUND
    reason = Reason.NOT_FOUND


class AlreadyExists(MemsvcError):
    kind = Kind.ALREADY_EXISTS
    reason = Reason.ALREADY_EXISTS


class FailedPrecondition(MemsvcError):
    kind = Kind.FAILED_PRECONDITION
    reason = Reason.FAILED_PRECONDITION


class ResourceExhausted(MemsvcError):
    kind = Kind.RESOURCE_EXHAUSTED
    reason = Reason.RESOURCE_EXHAUSTED


class Unavailable(MemsvcError):
    kind = Kind.UNAVAILABLE
    reason = Reason.UNAVAILABLE


class DeadlineExceeded(MemsvcError):
    kind = Kind.DEADLINE_EXCEEDED
    reason = Reason.DEADLINE_EXCEEDED


class Unauthenticated(MemsvcError):
    kind = Kind.UNAUTHENTICATED
    reason = Reason.INVALID_TOKEN


class PermissionDenied(MemsvcError):
    kind = Kind.PERMISSION_DENIED
    reason = Reason.PERMISSION_DENIED


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
                                 reason=Reason.DISK_FULL)
    return Unavailable(f"storage error while {what}{detail}; nothing was stored, retry later",
                       reason=Reason.STORAGE_ERROR)
