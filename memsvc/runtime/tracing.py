"""OpenTelemetry traces of every RPC and its stages, exported over OTLP/HTTP when tracing_endpoint is set.

Owns the only opentelemetry imports (the optional `tracing` extra), the
tracer's start and flush, the stage spans' helpers the domain calls
(`span`, `traced`), how a span's parent crosses a thread hop (`carried`)
or reaches work one thread gathers for many calls (`Gathered`), and the
session id's hash (`session_hash`). Off, which is the default, nothing here
imports opentelemetry and each helper costs one test of a module global.
Must never record message text, a query, a lesson or a raw session id:
callers pass counts, names and codes only.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from memsvc.core.errors import InvalidSetting

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

Attribute = str | int | float | bool
P = ParamSpec("P")
T = TypeVar("T")

SERVICE_NAME = "memsvc"
EXPORT_TIMEOUT_SECONDS = 5.0
"How long one export (a batch of spans) may take; a receiver that is down costs dropped spans, never a call."
GATHERED_PER_KEY = 16
"Most callers' contexts a `Gathered` keeps for one key until its work runs: a backlog keeps the first ones."
GATHERED_KEYS = 4096
"Most keys a `Gathered` holds contexts for: work handed over for longer than its spans are worth is not traced."

_tracer: Tracer | None = None
_provider: TracerProvider | None = None


class Noted:
    """What a `span` block may add to its span: attributes learned as the work went (a status, a reason)."""

    def __init__(self, span: Span | None):
        self._span = span

    def set(self, **attributes: Attribute) -> None:
        if self._span is not None:
            self._span.set_attributes(attributes)

    def failed(self, description: str) -> None:
        """Mark the span as an error (a status code other than OK)."""
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, description))


_UNTRACED = Noted(None)
_NOTHING = contextlib.nullcontext(_UNTRACED)


def enabled() -> bool:
    return _tracer is not None


def start(endpoint: str, instance: str = "") -> None:
    """Export spans to the OTLP/HTTP traces endpoint `endpoint` (e.g. http://127.0.0.1:4318/v1/traces) from now on;
    `instance` names this server (shard_name) in every span's resource."""
    global _tracer, _provider
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise InvalidSetting(f"tracing_endpoint needs the tracing extra: pip install 'memsvc[tracing]' ({exc})") \
            from exc
    resource = Resource.create({"service.name": SERVICE_NAME,
                                **({"service.instance.id": instance} if instance else {})})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint,
                                                                    timeout=EXPORT_TIMEOUT_SECONDS)))
    _provider, _tracer = provider, provider.get_tracer("memsvc")


def stop() -> None:
    """Export the spans still held, then trace no more."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def session_hash(session_id: str) -> str:
    """What a span records of a session id: the first 16 hex digits of its SHA-256, enough to follow one
    session across traces without its name (which may be a user's) leaving the server."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:16]


def span(name: str, /, **attributes: Attribute) -> contextlib.AbstractContextManager[Noted]:
    """A child of the current span around a block (a no-op when tracing is off)."""
    if _tracer is None:
        return _NOTHING
    return _opened(_tracer, name, attributes, None, server=False)


def served(name: str, headers: Mapping[str, str], /, **attributes: Attribute) \
        -> contextlib.AbstractContextManager[Noted]:
    """The span of one RPC, named after its method, child of the caller's span when `headers` (the call's
    metadata) carry a W3C traceparent."""
    if _tracer is None:
        return _NOTHING
    from opentelemetry.propagate import extract

    return _opened(_tracer, name, attributes, extract(headers), server=True)


@contextlib.contextmanager
def _opened(tracer: Tracer, name: str, attributes: Mapping[str, Attribute], parent: Context | None, *,
            server: bool) -> Iterator[Noted]:
    from opentelemetry.trace import SpanKind

    kind = SpanKind.SERVER if server else SpanKind.INTERNAL
    # Neither the exception's text nor its traceback: both may quote a session id or a message.
    with tracer.start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                      record_exception=False, set_status_on_exception=False) as opened:
        noted = Noted(opened)
        try:
            yield noted
        except BaseException as exc:
            if not server:  # an RPC's span says its status code instead (rpc/instrument.py)
                noted.failed(type(exc).__name__)
            raise


def traced(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A function's every call in a span of its own (a stage: keyword search, fusion, a FitContext stage)."""
    def decorate(function: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            if _tracer is None:
                return function(*args, **kwargs)
            with span(name):
                return function(*args, **kwargs)
        return call
    return decorate


def annotate(**attributes: Attribute) -> None:
    """Add attributes to the current span (the RPC's, when a transport learns who called)."""
    if _tracer is not None:
        from opentelemetry.trace import get_current_span

        get_current_span().set_attributes(attributes)


def carried(call: Callable[P, T]) -> Callable[P, T]:
    """`call`, to run later on another thread as a child of the current span (asyncio.to_thread does this
    itself; our own threads do not): once, since a context runs on one thread at a time."""
    if _tracer is None:
        return call
    context = contextvars.copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return context.run(call, *args, **kwargs)
    return run


class Gathered:
    """Spans for work one thread does later for many callers (a journal sync, an embedding batch): each caller
    `note`s its context under a key when it hands work over; the worker's `span(key)` makes one span of the same
    name and times in each of their traces. When tracing is off it holds nothing."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, list[Context]] = {}

    def note(self, key: Hashable) -> None:
        if _tracer is None:
            return
        from opentelemetry.context import get_current
        from opentelemetry.trace import get_current_span

        if not get_current_span().get_span_context().is_valid:
            return  # no call to report to (a background job)
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is None and len(self._waiting) < GATHERED_KEYS:
                waiting = self._waiting[key] = []
            if waiting is not None and len(waiting) < GATHERED_PER_KEY:
                waiting.append(get_current())

    def take(self, *keys: Hashable) -> list[Context]:
        if _tracer is None:
            return []
        with self._lock:
            return [context for key in keys for context in self._waiting.pop(key, ())]

    def span(self, *keys: Hashable, **attributes: Attribute) -> contextlib.AbstractContextManager[object]:
        """Around the work done for `keys`: one span in the trace of each caller noted under them."""
        parents = self.take(*keys)
        return _in_each(parents, self.name, attributes) if parents else _NOTHING


@contextlib.contextmanager
def _in_each(parents: list[Context], name: str, attributes: Mapping[str, Attribute]) -> Iterator[None]:
    started, failed = time.time_ns(), False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _ended_in(parents, name, started, time.time_ns(), attributes, failed)


def _ended_in(parents: list[Context], name: str, started: int, ended: int, attributes: Mapping[str, Attribute],
              failed: bool) -> None:
    tracer = _tracer
    if tracer is None:
        return
    from opentelemetry.trace import Status, StatusCode

    for parent in parents:
        done = tracer.start_span(name, context=parent, attributes={**attributes, "callers": len(parents)},
                                 start_time=started)
        if failed:
            done.set_status(Status(StatusCode.ERROR))
        done.end(end_time=ended)

