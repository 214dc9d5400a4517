"""The one place where domain errors become gRPC statuses.

Every servicer method is wrapped by `translated`: a MemsvcError becomes its
status code with a `google.rpc.ErrorInfo{reason}` attached; anything else is
logged and becomes INTERNAL, never UNKNOWN. Must never decide what is an
error: the domain does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from memsvc.core.errors import MemsvcError
from memsvc.core.reasons import Kind, Reason

log = logging.getLogger(__name__)

ERROR_DOMAIN = "memsvc"

CODES = {
    Kind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Kind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Kind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Kind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    Kind.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Kind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Kind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Kind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    Kind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Kind.INTERNAL: grpc.StatusCode.INTERNAL,
}


def to_status(error: MemsvcError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    code = CODES[error.kind]
    return rpc_status.to_status(status_pb2.Status(code=code.value[0], message=error.message, details=[detail]))


Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


def translated(method: Handler) -> Handler:
    """Run a servicer method, turning every failure into a documented status."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # a Rust panic in a native library is a BaseException: still INTERNAL
            await _abort(context, error, method.__name__)

    return wrapper  # type: ignore[return-value]


Streamer = TypeVar("Streamer", bound=Callable[..., AsyncGenerator[Any, None]])


def translated_stream(method: Streamer) -> Streamer:
    """`translated` for a server-streaming method (an async generator): a failure ends the stream
    with its documented status, after the replies already sent; a stream that ends early (cancelled,
    abandoned) closes the method's generator at once, so what it holds is released then, not when
    the garbage collector gets to it."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncGenerator[Any, None]:
        async with contextlib.aclosing(method(self, request, context)) as replies:
            try:
                async for reply in replies:
                    yield reply
            except grpc.aio.AbortError:
                raise
            except (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:
                await _abort(context, error, method.__name__)

    return wrapper  # type: ignore[return-value]


async def _abort(context: grpc.aio.ServicerContext, error: BaseException, rpc: str) -> None:
    if not isinstance(error, MemsvcError):
        log.exception("unexpected error", extra={"rpc": rpc}, exc_info=error)
        error = MemsvcError(f"internal error in {rpc}; the server log has the details", reason=Reason.INTERNAL)
    await context.abort_with_status(to_status(error))
