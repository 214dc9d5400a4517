"""Rebuilding a gRPC method handler around new behaviour, for the server's interceptors.

Owns the four handler shapes (unary/stream request x unary/stream response) so
each interceptor states only what it adds. Must never decide anything about a
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
