"""The interceptors that observe every RPC: Prometheus metrics (memsvc/runtime/metrics.py) and
OpenTelemetry spans (memsvc/runtime/tracing.py).

Owns the mapping of a call to `grpc_server_*` labels (type, service, method,
status code), to its span's attributes (method, status code, ErrorInfo
reason, the session id's hash; the tenant is added where admission learns it),
what a span says of a call's end over either transport (`note_outcome`),
and naming the calls the dashboard plots (`observe_call`, for gRPC and HTTP
alike). Must never change a call's outcome: it observes and re-raises. Calls
refused by `max_concurrent_rpcs` never reach an interceptor, so they are
neither counted nor traced here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2, status_pb2

from memsvc.rpc.handlers import Behaviour, rewrap, shape
from memsvc.runtime import metrics, tracing
from memsvc.search.query import Query

T = TypeVar("T")

GRPC_TYPES = {"unary_unary": "unary", "unary_stream": "server_stream", "stream_unary": "client_stream",
              "stream_stream": "bidi_stream"}


MATCH_KINDS = {1: "search_semantic", 2: "search_keyword", 3: "search_hybrid"}
"SearchRequest.match -> the kind plotted; unset, the mode the domain resolves (`_search_kind`)."


def observe_call(method: str, tenant: str, request: object, reply: object, seconds: float) -> None:
    """A finished unary call, to metrics.call_finished when it is of a kind the dashboard plots."""
    if method == "Append":
        metrics.call_finished("append", tenant, seconds)
    elif method == "Search":
        metrics.call_finished(_search_kind(request), tenant, seconds)
    elif method in ("LookupErrors", "SearchErrors"):
        metrics.call_finished("lookup_errors", tenant, seconds, len(getattr(reply, "records", ())))


def _search_kind(request: object) -> str:
    kind = MATCH_KINDS.get(getattr(request, "match", 0))
    if kind is None:  # no match named: the domain's default, by the same rule (Query.mode)
        unnamed = Query(session_id="", text=getattr(request, "query", ""),
                        vector=[1.0] if getattr(request, "query_embedding", None) else [])
        kind = f"search_{unnamed.mode}"
    return kind


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


def _around(behaviour: Behaviour, begin: Callable[[object], contextlib.AbstractContextManager[T]],
            end: Callable[[T, BaseException | None, grpc.aio.ServicerContext], None]) -> Behaviour:
    """`behaviour` (unary or streaming) inside `begin(request)`, and `end(what it gave, the error the call
    ended with or None, context)` once it is over: one shape for every observer of calls."""
    if inspect.isasyncgenfunction(behaviour):
        async def stream(request: object, context: grpc.aio.ServicerContext) -> AsyncIterator[object]:
            with begin(request) as began:
                error = None
                try:
                    async with contextlib.aclosing(behaviour(request, context)) as replies:
                        async for reply in replies:
                            yield reply
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    end(began, error, context)
        return stream

    async def call(request: object, context: grpc.aio.ServicerContext) -> object:
        with begin(request) as began:
            error = None
            try:
                return await behaviour(request, context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                end(began, error, context)
    return call


def _observed(behaviour: Behaviour, labels: tuple[str, str, str]) -> Behaviour:
    return _around(behaviour, lambda _: contextlib.nullcontext(_Observation(labels)),
                   lambda observation, error, context: observation.finish(_outcome(error, context)))


class Metrics(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")
        labels = (GRPC_TYPES[shape(handler)], service, method)
        return rewrap(handler, lambda behaviour: _observed(behaviour, labels))


TRACE_HEADERS = ("traceparent", "tracestate")
"The W3C trace context a caller's metadata may carry: the only metadata tracing reads."
STATUS_DETAILS = "grpc-status-details-bin"
"The trailing metadata rpc/status.py puts a google.rpc.Status with its ErrorInfo in."


def reason_in(trailing_metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The ErrorInfo reason in a call's trailing metadata (where rpc/status.py puts it); empty when none."""
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS:
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info.reason
    return ""


def note_outcome(noted: tracing.Noted, code: grpc.StatusCode, reason: str) -> None:
    """What every RPC's span says of its end, over either transport: the status's name, and its reason when
    it failed."""
    noted.set(**{"memsvc.status": code.name})
    if code != grpc.StatusCode.OK:
        noted.set(**{"memsvc.reason": reason})
        noted.failed(code.name)


def _ended(noted: tracing.Noted, error: BaseException | None, context: grpc.aio.ServicerContext) -> None:
    code = _outcome(error, context)
    noted.set(**{"rpc.grpc.status_code": code.value[0]})
    note_outcome(noted, code, "" if code == grpc.StatusCode.OK else reason_in(context.trailing_metadata()))


def session_attributes(request: object) -> dict[str, tracing.Attribute]:
    session_id = getattr(request, "session_id", "")
    return {"memsvc.session": tracing.session_hash(session_id)} if isinstance(session_id, str) and session_id else {}


def _spanned(behaviour: Behaviour, name: str, headers: dict[str, str],
             attributes: dict[str, tracing.Attribute]) -> Behaviour:
    return _around(behaviour,
                   lambda request: tracing.served(name, headers, **attributes, **session_attributes(request)), _ended)


class Traces(grpc.aio.ServerInterceptor):
    """A span for each call, named after its method, a child of the caller's when its metadata carries a W3C
    traceparent: outside admission, so refused calls are traced too."""

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")
        headers = {key: value for key, value in handler_call_details.invocation_metadata or ()
                   if key in TRACE_HEADERS and isinstance(value, str)}
        attributes: dict[str, tracing.Attribute] = {"rpc.system": "grpc", "rpc.service": service,
                                                    "rpc.method": method}
        return rewrap(handler, lambda behaviour: _spanned(behaviour, method, headers, attributes))
