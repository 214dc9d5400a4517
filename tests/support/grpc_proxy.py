"""A real gRPC proxy on loopback, for tests: every call is forwarded, bytes untouched, to one
upstream memsvc, and recorded (method, request metadata, request bytes: a client stream's first
request, the seconds left of its deadline when it arrived). Calls are unary unless `streaming`
names the method's shape. It can answer the
next calls of a method with an injected status instead of forwarding them, the way a restarting
server or a proxy losing its backend would. Uses grpcio only: it must never know memsvc's types.

The Node and Go tests run it as a program:
    python -m tests.support.grpc_proxy UPSTREAM [--fail METHOD=CODE:TIMES ...]
prints {"event": "serving", "target": ...} on stdout, and on SIGTERM one {"method", "metadata",
"deadline_seconds"} line per call it saw, then exits.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc

HOP_BY_HOP = {"user-agent", "grpc-accept-encoding", "grpc-timeout", "te", "content-type"}


@dataclass(frozen=True)
class Seen:
    method: str
    metadata: dict[str, str]
    request: bytes
    deadline_seconds: float | None
    "What was left of the caller's deadline on arrival; None for a call without one."


class RecordingProxy(grpc.GenericRpcHandler):
    def __init__(self, upstream: str, streaming: dict[str, str] | None = None):
        self.streaming = streaming or {}
        "Full method path -> unary_stream or stream_unary."
        self.calls: list[Seen] = []
        self._failures: dict[str, list[grpc.StatusCode]] = defaultdict(list)
        self._lock = threading.Lock()
        self._upstream = grpc.insecure_channel(upstream)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self._server.add_generic_rpc_handlers([self])
        self.target = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def __enter__(self) -> RecordingProxy:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)
        self._upstream.close()

    def fail_next(self, method: str, code: grpc.StatusCode, times: int = 1) -> None:
        """Answer the next `times` calls of `method` ("Append" or a full path) with `code`."""
        with self._lock:
            self._failures[method.rpartition("/")[2]].extend([code] * times)

    def seen(self, method: str) -> list[Seen]:
        return [call for call in self.calls if call.method.rpartition("/")[2] == method]

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method  # type: ignore[attr-defined]
        shape = self.streaming.get(method, "unary_unary")

        def admit(request: bytes, context: grpc.ServicerContext) -> tuple[tuple[str, str], ...]:
            metadata = tuple(context.invocation_metadata())
            with self._lock:
                self.calls.append(Seen(method, dict(metadata), request, context.time_remaining()))
                queue = self._failures[method.rpartition("/")[2]]
                injected = queue.pop(0) if queue else None
            if injected is not None:
                context.abort(injected, "injected by the test proxy")
            return tuple((key, value) for key, value in metadata if key not in HOP_BY_HOP)

        def failed(error: grpc.RpcError, context: grpc.ServicerContext) -> None:
            context.set_trailing_metadata(error.trailing_metadata())  # type: ignore[attr-defined]
            context.abort(error.code(), error.details())  # type: ignore[attr-defined]

        def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
            passed = admit(request, context)
            try:
                reply, call = self._upstream.unary_unary(method).with_call(
                    request, metadata=passed, timeout=_remaining(context))
            except grpc.RpcError as error:
                failed(error, context)
            context.set_trailing_metadata(call.trailing_metadata())
            return reply

        def forward_replies(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            passed = admit(request, context)
            try:
                yield from self._upstream.unary_stream(method)(request, metadata=passed,
                                                               timeout=_remaining(context))
            except grpc.RpcError as error:
                failed(error, context)

        def forward_requests(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            first = next(requests, b"")
            passed = admit(first, context)
            try:
                return self._upstream.stream_unary(method)(itertools.chain([first], requests), metadata=passed,
                                                           timeout=_remaining(context))
            except grpc.RpcError as error:
                failed(error, context)
            raise AssertionError("unreachable: failed() aborts")

        if shape == "unary_stream":
            return grpc.unary_stream_rpc_method_handler(forward_replies)
        if shape == "stream_unary":
            return grpc.stream_unary_rpc_method_handler(forward_requests)
        return grpc.unary_unary_rpc_method_handler(forward)


def _remaining(context: grpc.ServicerContext) -> float | None:
    """The caller's deadline, for the upstream call; None when it set none (grpcio then reports
    a time too far off to pass on)."""
    left = context.time_remaining()
    return None if left is None or left > 86_400 else left


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.grpc_proxy")
    parser.add_argument("upstream")
    parser.add_argument("--fail", action="append", default=[], metavar="METHOD=CODE:TIMES")
    args = parser.parse_args()
    # SIGTERM is blocked before grpc starts its threads (they inherit the mask) and taken by sigwait: a
    # handler may run on any thread, and one that ran on a grpc thread never woke the main thread waiting
    # on an Event, so the proxy outlived its test's stop() (a hang of the Node suite, seen once).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    with RecordingProxy(args.upstream) as proxy:
        for rule in args.fail:
            method, _, failure = rule.partition("=")
            code, _, times = failure.partition(":")
            proxy.fail_next(method, grpc.StatusCode[code], int(times or 1))
        print(json.dumps({"event": "serving", "target": proxy.target}), flush=True)
        signal.sigwait({signal.SIGTERM})
    for call in proxy.calls:
        print(json.dumps({"method": call.method, "metadata": call.metadata,
                          "deadline_seconds": call.deadline_seconds}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
