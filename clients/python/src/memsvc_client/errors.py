"""`MemsvcError` and one subclass per gRPC status code, carrying the server's stable reason.

Owns reading a failed call: its status code, the `google.rpc.ErrorInfo` reason (UPPER_SNAKE,
stable: switch on it) and metadata from the `grpc-status-details-bin` trailer, and the message
for people. Must never decide what to retry: `retry` does.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


class MemsvcError(Exception):
    """A failed call. `code` is the grpc.StatusCode, `reason` the server's stable reason ("" when
    the call failed before the server answered: unreachable, deadline), `message` for people."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 metadata: dict[str, str] | None = None):
        super().__init__(f"{code.name} {reason}: {message}" if reason else f"{code.name}: {message}")
        self.code, self.reason, self.message = code, reason, message
        self.metadata = metadata or {}


class CallCancelledError(MemsvcError):
    """CANCELLED: the call was cancelled (by the client, or the connection dropped)."""


class UnknownError(MemsvcError):
    """UNKNOWN: memsvc never sends it; a proxy or a transport failure may."""


class InvalidArgumentError(MemsvcError):
    """INVALID_ARGUMENT: bad input (id, content, enum, size); the same call fails the same way."""


class DeadlineExceededError(MemsvcError):
    """DEADLINE_EXCEEDED: no answer within the deadline; the call may or may not have happened."""


class NotFoundError(MemsvcError):
    """NOT_FOUND: a session or lesson that must exist does not."""


class AlreadyExistsError(MemsvcError):
    """ALREADY_EXISTS."""


class PermissionDeniedError(MemsvcError):
    """PERMISSION_DENIED."""


class ResourceExhaustedError(MemsvcError):
    """RESOURCE_EXHAUSTED: a size limit, a quota, overload, or a full disk (reason DISK_FULL)."""


class FailedPreconditionError(MemsvcError):
    """FAILED_PRECONDITION: a setting is missing (no LLM configured)."""


class AbortedError(MemsvcError):
    """ABORTED."""


class OutOfRangeError(MemsvcError):
    """OUT_OF_RANGE."""


class UnimplementedError(MemsvcError):
    """UNIMPLEMENTED: the server's contract is older than this client's."""


class InternalError(MemsvcError):
    """INTERNAL: a bug in the server (or an untrusted TLS certificate)."""


class UnavailableError(MemsvcError):
    """UNAVAILABLE: server down, starting, draining, or a storage error; nothing was stored."""


class DataLossError(MemsvcError):
    """DATA_LOSS."""


class UnauthenticatedError(MemsvcError):
    """UNAUTHENTICATED: the token is missing (MISSING_TOKEN) or wrong (INVALID_TOKEN)."""


ERRORS: dict[grpc.StatusCode, type[MemsvcError]] = {
    grpc.StatusCode.CANCELLED: CallCancelledError,
    grpc.StatusCode.UNKNOWN: UnknownError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DATA_LOSS: DataLossError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
}
"""The subclass raised for each status code."""


def from_rpc_error(error: grpc.RpcError) -> MemsvcError:
    """The MemsvcError subclass for a failed grpcio call (sync or asyncio)."""
    call: Any = error  # a grpc.Call (sync) or a grpc.aio.AioRpcError: both have code() and details()
    code: grpc.StatusCode = call.code()
    reason, metadata = "", {}
    status = rpc_status.from_call(call) if isinstance(call, grpc.Call) else _aio_status(call)
    for detail in status.details if status else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason, metadata = info.reason, dict(info.metadata)
    return ERRORS.get(code, MemsvcError)(code, reason, call.details() or "", metadata)


def _aio_status(error: Any) -> Any:
    """grpc.aio's AioRpcError is no grpc.Call: read the status trailer from its metadata."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None
