"""A real gRPC proxy on loopback, for tests: every unary call is forwarded, bytes untouched, to
one upstream memsvc, and recorded (method, request metadata, request bytes, the seconds left of
its deadline when it arrived). It can answer the
next calls of a method with an injected status instead of forwarding them, the way a restarting
server or a proxy losing its backend would. Uses grpcio only: it must never know memsvc's types.

The Node and Go tests run it as a program:
    python -m tests.support.grpc_proxy UPSTREAM [--fail METHOD=CODE:TIMES ...]
prints {"event": "serving", "target": ...} on stdout, and on SIGTERM one {"method", "metadata",
"deadline_seconds"} line per call it saw, then exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections import defaultdict
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
    def __init__(self, upstream: str):
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

        def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
            metadata = tuple(context.invocation_metadata())
            with self._lock:
                self.calls.append(Seen(method, dict(metadata), request, context.time_remaining()))
                queue = self._failures[method.rpartition("/")[2]]
                injected = queue.pop(0) if queue else None
            if injected is not None:
                context.abort(injected, "injected by the test proxy")
            passed = tuple((key, value) for key, value in metadata if key not in HOP_BY_HOP)
            try:
                reply, call = self._upstream.unary_unary(method).with_call(
                    request, metadata=passed, timeout=context.time_remaining())
            except grpc.RpcError as error:
                context.set_trailing_metadata(error.trailing_metadata())  # type: ignore[attr-defined]
                context.abort(error.code(), error.details())  # type: ignore[attr-defined]
            context.set_trailing_metadata(call.trailing_metadata())
            return reply

        return grpc.unary_unary_rpc_method_handler(forward)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.grpc_proxy")
    parser.add_argument("upstream")
    parser.add_argument("--fail", action="append", default=[], metavar="METHOD=CODE:TIMES")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with RecordingProxy(args.upstream) as proxy:
        for rule in args.fail:
            method, _, failure = rule.partition("=")
            code, _, times = failure.partition(":")
            proxy.fail_next(method, grpc.StatusCode[code], int(times or 1))
        print(json.dumps({"event": "serving", "target": proxy.target}), flush=True)
        stop.wait()
    for call in proxy.calls:
        print(json.dumps({"method": call.method, "metadata": call.metadata,
                          "deadline_seconds": call.deadline_seconds}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
