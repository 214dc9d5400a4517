"""The interceptor that answers undecodable requests with INVALID_ARGUMENT.

grpcio turns a request whose bytes do not parse (corrupt wire format, a
string field that is not UTF-8) into UNKNOWN before any servicer runs. This
interceptor decodes memsvc's requests itself and hands the servicer a marker
instead, so the caller gets INVALID_ARGUMENT with reason MALFORMED_REQUEST.
Must never touch requests that decode.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from memsvc.core.errors import InvalidArgument
from memsvc.rpc.handlers import Behaviour, rewrap
from memsvc.rpc.status import to_status

SERVICES = ("/memsvc.v1.",)


class _Undecodable:
    def __init__(self, error: DecodeError):
        self.error = error


def _tolerant(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decoded(raw: bytes) -> Any:
        try:
            return decode(raw)
        except DecodeError as error:
            return _Undecodable(error)
    return decoded


def undecodable(error: Exception) -> InvalidArgument:
    """The refusal of a request whose bytes (or, over HTTP, JSON) do not decode; memsvc/http shares it."""
    return InvalidArgument(f"the request could not be decoded ({error}); send a valid message of the method's "
                           "request type", reason="MALFORMED_REQUEST")


async def _refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, _Undecodable):
        await context.abort_with_status(to_status(undecodable(request.error)))


def _refusing_undecodable(behaviour: Behaviour) -> Behaviour:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _refuse(request, context)
        return await behaviour(request, context)
    return checked


def _refusing_undecodable_replies(behaviour: Behaviour) -> Behaviour:
    """The same for a server-streaming method (an async generator)."""
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await _refuse(request, context)
        async for reply in behaviour(request, context):
            yield reply
    return checked


def _refusing_undecodable_requests(behaviour: Behaviour) -> Behaviour:
    """The same for a client-streaming method: each request is checked as it arrives, and the
    refusal is raised in the servicer's stream, so the servicer (rpc/status.py's `translated`)
    answers it once it has undone what the earlier requests began."""
    async def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async def decoded() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, _Undecodable):
                    raise undecodable(request.error)
                yield request
        return await behaviour(decoded(), context)
    return checked


class MalformedRequests(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if (handler is None or not handler_call_details.method.startswith(SERVICES)
                or handler.request_deserializer is None or (handler.request_streaming and handler.response_streaming)):
            return handler
        wrap = (_refusing_undecodable_requests if handler.request_streaming
                else _refusing_undecodable_replies if handler.response_streaming else _refusing_undecodable)
        return rewrap(handler, wrap, _tolerant(handler.request_deserializer))
