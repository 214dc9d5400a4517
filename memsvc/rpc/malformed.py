"""The interceptor that answers undecodable or oversized requests before they are decoded.

grpcio turns a request whose bytes do not parse (corrupt wire format, a
string field that is not UTF-8) into UNKNOWN before any servicer runs. This
interceptor decodes memsvc's requests itself and hands the servicer a marker
instead, so the caller gets INVALID_ARGUMENT with reason MALFORMED_REQUEST.
It also refuses, undecoded, a request far larger than any valid one of its
service (RESOURCE_EXHAUSTED `REQUEST_TOO_LARGE`): decoded, a few megabytes
of refused text cost many times that in memory. Must never touch requests
that decode and fit.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from memsvc.core.errors import InvalidArgument, MemsvcError, ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.lessons import validation
from memsvc.rpc.handlers import Behaviour, Rewrapped, rewrap
from memsvc.rpc.status import to_status

SERVICES = ("/memsvc.v1.",)
ERROR_MEMORY = "/memsvc.v1.ErrorMemoryService/"
ERROR_MEMORY_MAX_REQUEST_BYTES = 4 * (3 * validation.MAX_TEXT_BYTES + validation.MAX_ERROR_TEXT_BYTES)
"Four times the largest valid lesson request (symptom, cause and action, or a lookup's error text)."


class _Refused:
    """Stands in for a request that is refused before the servicer sees it."""

    def __init__(self, error: MemsvcError):
        self.error = error


def _tolerant(decode: Callable[[bytes], Any], max_bytes: int | None) -> Callable[[bytes], Any]:
    def decoded(raw: bytes) -> Any:
        if max_bytes is not None and len(raw) > max_bytes:
            return _Refused(ResourceExhausted(
                f"the request is {len(raw)} bytes; no valid request of this service exceeds {max_bytes}",
                reason=Reason.REQUEST_TOO_LARGE))
        try:
            return decode(raw)
        except DecodeError as error:
            return _Refused(undecodable(error))
    return decoded


def undecodable(error: Exception) -> InvalidArgument:
    """The refusal of a request whose bytes (or, over HTTP, JSON) do not decode; memsvc/http shares it."""
    return InvalidArgument(f"the request could not be decoded ({error}); send a valid message of the method's "
                           "request type", reason=Reason.MALFORMED_REQUEST)


async def _refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, _Refused):
        await context.abort_with_status(to_status(request.error))


def _refusing(behaviour: Behaviour) -> Behaviour:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _refuse(request, context)
        return await behaviour(request, context)
    return checked


def _refusing_replies(behaviour: Behaviour) -> Behaviour:
    """The same for a server-streaming method (an async generator)."""
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await _refuse(request, context)
        async with contextlib.aclosing(behaviour(request, context)) as replies:
            async for reply in replies:
                yield reply
    return checked


def _refusing_requests(behaviour: Behaviour) -> Behaviour:
    """The same for a client-streaming method: each request is checked as it arrives, and the
    refusal is raised in the servicer's stream, so the servicer (rpc/status.py's `translated`)
    answers it once it has undone what the earlier requests began."""
    async def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def decoded() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, _Refused):
                    raise request.error
                yield request
        return await behaviour(decoded(), context)
    return checked


class MalformedRequests(grpc.aio.ServerInterceptor):
    def __init__(self) -> None:
        self._rewrapped = Rewrapped()

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if (handler is None or not method.startswith(SERVICES)
                or handler.request_deserializer is None or (handler.request_streaming and handler.response_streaming)):
            return handler
        decode = handler.request_deserializer
        return self._rewrapped.get(method, handler, lambda handler: _checking(method, handler, decode))


def _checking(method: str, handler: grpc.RpcMethodHandler, decode: Callable[[bytes], Any]) -> grpc.RpcMethodHandler:
    max_bytes = ERROR_MEMORY_MAX_REQUEST_BYTES if method.startswith(ERROR_MEMORY) else None
    wrap = (_refusing_requests if handler.request_streaming
            else _refusing_replies if handler.response_streaming else _refusing)
    return rewrap(handler, wrap, _tolerant(decode, max_bytes))
