"""Prometheus metrics: the one registry, the names in it, and the port that serves it.

Owns the registry, the gRPC server metrics (`grpc_server_*`, the names of
go-grpc-prometheus), the `memsvc_` prefix of everything else, and the HTTP
listener of `metrics_listen`. Any module adds a metric in one line:

    BUILDS = metrics.counter("vector_generations_total", "Vector index generations built.")
    metrics.gauge("archive_queue_depth", "Archive operations not yet committed.", lambda: self.backlog)

Finished calls of the kinds the dashboard plots are observed once, in
`call_finished`: into the `memsvc_call_seconds{kind}` histogram and to the
one listener the assembly sets (runtime/history.py's ring, per tenant).

A `gauge`/`total` reads a number the domain already keeps, at scrape time
only; registering the same name again replaces the reading (a new App
replaces the old one's). Must never label a metric with a session id, text or
anything else unbounded (each value is a series held forever), and never
make a request wait for a scrape (each scrape has a thread of its own, a
bounded number of them).
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from memsvc.core.errors import InvalidSetting
from memsvc.net.descriptors import ACCEPT_RETRY_SECONDS, RESOURCE_ERRORS, ResourceLog

log = logging.getLogger(__name__)

PREFIX = "memsvc_"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"Seconds; a loopback RPC takes ~0.5 ms, compaction and LLM calls up to tens of seconds."

REGISTRY = CollectorRegistry()
for _standard in (prometheus_client.ProcessCollector, prometheus_client.PlatformCollector,
                  prometheus_client.GCCollector):
    _standard(registry=REGISTRY)

RPC_LABELS = ("grpc_type", "grpc_service", "grpc_method")
GRPC_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", RPC_LABELS, registry=REGISTRY)
GRPC_HANDLED = Counter("grpc_server_handled_total", "RPCs completed on the server, whatever their status.",
                       RPC_LABELS + ("grpc_code",), registry=REGISTRY)
GRPC_HANDLING_SECONDS = Histogram("grpc_server_handling_seconds", "Time from the start of an RPC to its status.",
                                  RPC_LABELS, buckets=LATENCY_BUCKETS, registry=REGISTRY)


CALL_SECONDS = Histogram(PREFIX + "call_seconds", "Calls of the kinds the dashboard plots (append, search by mode, "
                         "lookup_errors), over gRPC and HTTP, from admission to reply.", ("kind",),
                         buckets=LATENCY_BUCKETS, registry=REGISTRY)
CallListener = Callable[[str, str, float, int], None]
"(kind, tenant, seconds, error-memory hits) of each finished call."
_call_listener: list[CallListener] = []
_call_children: dict[str, Any] = {}


def listen_to_calls(listener: CallListener) -> None:
    """Hand every finished call to `listener` from now on (a new App replaces the old one's)."""
    _call_listener[:] = [listener]


def call_finished(kind: str, tenant: str, seconds: float, hits: int = 0) -> None:
    """A call of `kind` (a bounded set: the transports name it) for `tenant` ended after `seconds`."""
    child = _call_children.get(kind)
    if child is None:  # labels() hashes and locks on each call: each kind's child is looked up once
        child = _call_children[kind] = CALL_SECONDS.labels(kind)
    child.observe(seconds)
    for listener in _call_listener:
        listener(kind, tenant, seconds, hits)


class _Readings(Collector):
    """Numbers read from the domain when Prometheus scrapes."""

    def __init__(self) -> None:
        self.readings: dict[str, tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str,
                                       Callable[[], float]]] = {}

    def collect(self) -> Iterator[Metric]:
        for name, (family, documentation, read) in list(self.readings.items()):
            try:
                value = float(read())
            except Exception:
                log.warning("metric reading failed", exc_info=True, extra={"metric": name})
                continue
            yield family(name, documentation, value=value)


_readings = _Readings()
REGISTRY.register(_readings)
_instruments: dict[str, Counter | Histogram] = {}


def _name(name: str) -> str:
    if name.startswith(PREFIX):
        raise ValueError(f"metric {name!r}: give the name without {PREFIX!r}, it is added here")
    return PREFIX + name


def _instrument(kind: type[Counter | Histogram], name: str, documentation: str, labels: tuple[str, ...],
                buckets: tuple[float, ...] = LATENCY_BUCKETS) -> Counter | Histogram:
    found = _instruments.get(name)
    if found is None:
        if kind is Histogram:
            found = Histogram(_name(name), documentation, labels, registry=REGISTRY, buckets=buckets)
        else:
            found = Counter(_name(name), documentation, labels, registry=REGISTRY)
        _instruments[name] = found
    if not isinstance(found, kind):
        raise TypeError(f"metric {name!r} is already a {type(found).__name__}")
    return found


def counter(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Counter:
    """A counter the caller increments; the same name twice gives the same counter."""
    return _instrument(Counter, name, documentation, labels)  # type: ignore[return-value]


def histogram(name: str, documentation: str, labels: tuple[str, ...] = (),
              buckets: tuple[float, ...] = LATENCY_BUCKETS) -> Histogram:
    """A histogram the caller observes into; the same name twice gives the same histogram."""
    return _instrument(Histogram, name, documentation, labels, buckets=buckets)  # type: ignore[return-value]


def gauge(name: str, documentation: str, read: Callable[[], float]) -> None:
    """A value that goes up and down, read with `read()` at each scrape (keep it cheap and lock-free)."""
    _readings.readings[_name(name)] = (GaugeMetricFamily, documentation, read)


def total(name: str, documentation: str, read: Callable[[], float]) -> None:
    """A count that only grows, kept by the domain and read with `read()` at each scrape."""
    if not name.endswith("_total"):
        raise ValueError(f"counter {name!r} must end in _total")
    _readings.readings[_name(name)[:-len("_total")]] = (CounterMetricFamily, documentation, read)


class _BoundedServer(ThreadingWSGIServer):
    """prometheus_client's thread-per-connection server, bounded: at most `room` connections served at once
    (one past it is closed at once), each read and write given `timeout` seconds, and an accept that fails
    for want of descriptors retried after a pause and said once per interval (socketserver retries at once,
    spinning, and says nothing)."""

    room: threading.BoundedSemaphore
    resources: ResourceLog
    request_queue_size = 128  # socketserver's 5 makes connections beyond it retry their SYN for seconds

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as error:
            if error.errno in RESOURCE_ERRORS:
                self.resources.failed(error)
                time.sleep(ACCEPT_RETRY_SECONDS)  # this server's own thread
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.room.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.room.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.room.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback to stderr; a client that stalled or left is no error of the server's."""
        if not isinstance(sys.exc_info()[1], OSError):  # TimeoutError and ConnectionError are OSErrors
            log.exception("metrics request failed")


class _Until:
    """A connection's reader that gives the whole request `timeout` seconds from its start, not each read."""

    def __init__(self, reader: Any, connection: socket.socket, timeout: float):
        self.reader, self.connection, self.deadline = reader, connection, time.monotonic() + timeout

    def _wait_at_most_what_is_left(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took longer than header_timeout_seconds")
        self.connection.settimeout(left)

    def readline(self, limit: int = -1) -> bytes:
        self._wait_at_most_what_is_left()
        return bytes(self.reader.readline(limit))

    def read(self, size: int = -1) -> bytes:
        self._wait_at_most_what_is_left()
        return bytes(self.reader.read(size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


class _QuietHandler(WSGIRequestHandler):
    """Serves one scrape, its request line and headers within `timeout` seconds in all (a GET has no body),
    and logs nothing: a request line is no news."""

    def setup(self) -> None:
        super().setup()
        assert self.timeout is not None  # each MetricsListener's handler class sets it
        self.rfile = _Until(self.rfile, self.connection, self.timeout)  # type: ignore[assignment]

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # the headers are in: the reply gets the full timeout per write
        self.connection.settimeout(self.timeout)
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsListener:
    """The HTTP port Prometheus scrapes: GET /metrics, on at most `connections` connections at once, each
    closed when it waits `timeout_seconds` for the client."""

    def __init__(self, address: str, connections: int, timeout_seconds: float):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidSetting(f"metrics_listen {address!r} must be HOST:PORT")
        host = host.strip("[]")

        class Server(_BoundedServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            room = threading.BoundedSemaphore(connections)
            resources = ResourceLog("metrics")

        class Handler(_QuietHandler):
            timeout = timeout_seconds  # each read and write of a connection (socketserver's settimeout)

        try:
            self._http = make_server(host, int(port), make_wsgi_app(REGISTRY), Server, Handler)
        except OSError as exc:
            raise InvalidSetting(f"cannot serve metrics on {address}: {exc.strerror}") from exc
        self._thread = threading.Thread(target=self._http.serve_forever, name="metrics", daemon=True)
        self._thread.start()
        bound_port = self._http.server_address[1]
        self.address = f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
