"""A recording proxy in front of the test's real server, which can also lose replies; the session
ids framework users write."""

from __future__ import annotations

import threading
from collections import Counter

import grpc
import pytest

from tests.support.grpc_proxy import RecordingProxy

FRAMEWORK_SESSION_IDS = ["user:42", "conv/1", "ada.lovelace@example.com", "9b2f6c1e-4d3a-4f8e-a1b2-c3d4e5f60718"]
"""Session ids as framework users write them (SPEC §8: any UTF-8 up to 256 bytes, no control
characters), which every adapter takes as they are: `@pytest.mark.parametrize("session_id", ...)`."""


class ReplyLosingProxy(RecordingProxy):
    """A RecordingProxy that can also let a call through to the server, which does it, and then
    answer the client UNAVAILABLE: the reply lost on its way back, as a dropped connection does."""

    def __init__(self, upstream: str):
        super().__init__(upstream)
        self._losses: Counter[str] = Counter()
        self._losses_lock = threading.Lock()

    def lose_next_reply(self, method: str, times: int = 1) -> None:
        with self._losses_lock:
            self._losses[method] += times

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = super().service(handler_call_details)
        method = handler_call_details.method.rpartition("/")[2]  # type: ignore[attr-defined]
        forward = handler.unary_unary
        if forward is None:
            return handler

        def losing(request: bytes, context: grpc.ServicerContext) -> bytes:
            reply = forward(request, context)
            with self._losses_lock:
                lost = self._losses[method] > 0
                self._losses[method] -= lost
            if lost:
                context.abort(grpc.StatusCode.UNAVAILABLE, "reply lost by the test proxy")
            return reply

        return grpc.unary_unary_rpc_method_handler(losing)


@pytest.fixture
def proxy(server):
    with ReplyLosingProxy(server.tcp) as running:
        yield running
