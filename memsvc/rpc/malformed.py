"""The interceptor that answers undecodable requests with INVALID_ARGUMENT.

grpcio turns a request whose bytes do not parse (corrupt wire format, a
string field that is not UTF-8) into UNKNOWN before any servicer runs. This
interceptor decodes memsvc's requests itself and hands the servicer a marker
instead, so the caller gets INVALID_ARGUMENT with reason MALFORMED_REQUEST.
Must never touch requests that decode.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _refusing_undecodable(behaviour: Behaviour) -> Behaviour:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort_with_status(to_status(undecodable(request.error)))
        return await behaviour(request, context)
    return checked


class MalformedRequests(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if (handler is None or not handler_call_details.method.startswith(SERVICES)
                or handler.request_streaming or handler.request_deserializer is None):
            return handler
        return rewrap(handler, _refusing_undecodable, _tolerant(handler.request_deserializer))
