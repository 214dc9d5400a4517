"""Rebuilding a gRPC method handler around new behaviour, for the server's interceptors.

Owns the four handler shapes (unary/stream request x unary/stream response) so
each interceptor states only what it adds, and the cache that makes each
method's rebuilt handler once. Must never decide anything about a
call: the interceptors do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

Behaviour = Callable[..., Any]

_SHAPES = {
    (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
    (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
    (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
    (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
}


def shape(handler: grpc.RpcMethodHandler) -> str:
    """unary_unary, unary_stream, stream_unary or stream_stream."""
    return _SHAPES[handler.request_streaming, handler.response_streaming][0]


def rewrap(handler: grpc.RpcMethodHandler, wrap: Callable[[Behaviour], Behaviour],
           request_deserializer: Callable[[bytes], Any] | None = None) -> grpc.RpcMethodHandler:
    """A handler of the same shape and serializers (unless a deserializer is given) whose
    behaviour is `wrap(original behaviour)`."""
    attribute, make = _SHAPES[handler.request_streaming, handler.response_streaming]
    return make(wrap(getattr(handler, attribute)),
                request_deserializer=request_deserializer or handler.request_deserializer,
                response_serializer=handler.response_serializer)


class Rewrapped:
    """Each method's rebuilt handler, made once while the handler it wraps stays the same object. grpcio looks a
    method's handler up on every call (the same object each time), and rebuilding it there would make new
    wrappers on every call for the same result. Holds one entry per method the server serves."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def get(self, method: str, handler: grpc.RpcMethodHandler,
            make: Callable[[grpc.RpcMethodHandler], grpc.RpcMethodHandler]) -> grpc.RpcMethodHandler:
        """`make(handler)`, from the cache when `handler` is the one it was made from."""
        made = self._made.get(method)
        if made is None or made[0] is not handler:
            made = self._made[method] = handler, make(handler)
        return made[1]
