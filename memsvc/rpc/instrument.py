"""The interceptor that counts and times every RPC into memsvc/metrics.py.

Owns the mapping of a call to `grpc_server_*` labels (type, service, method,
status code), and naming the calls the dashboard plots (`observe_call`, for
gRPC and HTTP alike). Must never change a call's outcome: it observes and re-raises.
Calls refused by `max_concurrent_rpcs` never reach an interceptor, so they
are not counted here.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator

import grpc

from memsvc.rpc.handlers import Behaviour, rewrap, shape
from memsvc.runtime import metrics

GRPC_TYPES = {"unary_unary": "unary", "unary_stream": "server_stream", "stream_unary": "client_stream",
              "stream_stream": "bidi_stream"}


MATCH_KINDS = {0: "search_semantic", 1: "search_semantic", 2: "search_keyword", 3: "search_hybrid"}
"SearchRequest.match (unset: semantic) -> the kind plotted."


def observe_call(method: str, tenant: str, request: object, reply: object, seconds: float) -> None:
    """A finished unary call, to metrics.call_finished when it is of a kind the dashboard plots."""
    if method == "Append":
        metrics.call_finished("append", tenant, seconds)
    elif method == "Search":
        metrics.call_finished(MATCH_KINDS.get(getattr(request, "match", 0), "search_semantic"), tenant, seconds)
    elif method in ("LookupErrors", "SearchErrors"):
        metrics.call_finished("lookup_errors", tenant, seconds, len(getattr(reply, "records", ())))


class _Observation:
    """One call's labels and clock."""

    def __init__(self, labels: tuple[str, str, str]):
        self.labels = labels
        self.started = time.perf_counter()
        metrics.GRPC_STARTED.labels(*labels).inc()

    def finish(self, code: grpc.StatusCode) -> None:
        metrics.GRPC_HANDLED.labels(*self.labels, code.name).inc()
        metrics.GRPC_HANDLING_SECONDS.labels(*self.labels).observe(time.perf_counter() - self.started)


def _outcome(error: BaseException | None, context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    if error is None or isinstance(error, grpc.aio.AbortError):
        return context.code() or (grpc.StatusCode.OK if error is None else grpc.StatusCode.UNKNOWN)
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def _observed(behaviour: Behaviour, labels: tuple[str, str, str]) -> Behaviour:
    if inspect.isasyncgenfunction(behaviour):
        async def stream(request: object, context: grpc.aio.ServicerContext) -> AsyncIterator[object]:
            observation, error = _Observation(labels), None
            try:
                async for reply in behaviour(request, context):
                    yield reply
            except BaseException as exc:
                error = exc
                raise
            finally:
                observation.finish(_outcome(error, context))
        return stream

    async def call(request: object, context: grpc.aio.ServicerContext) -> object:
        observation, error = _Observation(labels), None
        try:
            return await behaviour(request, context)
        except BaseException as exc:
            error = exc
            raise
        finally:
            observation.finish(_outcome(error, context))
    return call


class Metrics(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")
        labels = (GRPC_TYPES[shape(handler)], service, method)
        return rewrap(handler, lambda behaviour: _observed(behaviour, labels))
