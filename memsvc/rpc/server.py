"""The server's lifecycle: lock the data directory, assemble the domain,
bind, serve health and reflection (and the health-only and metrics ports,
and the other transports it is handed, such as memsvc/http), keep health
true to what the server can do, and drain on SIGTERM.

Owns the order of start and stop, the health statuses (NOT_SERVING until
ready, while the data directory is gone, when a background thread died, and
from SIGTERM; `memsvc.archive` NOT_SERVING while the archive is damaged,
ErrorMemoryService while its lesson database cannot be reached), how many
connections each listener may keep open (max_connections, lowered so that
every listener full leaves reserved_fds descriptors to storage), the gRPC
servers' handshake and idle limits, and that a shutdown ends within
shutdown_grace_seconds whatever hangs. Must never hold request logic.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import grpc
import msgspec
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memsvc.app import App
from memsvc.core.config import Settings
from memsvc.core.durable import DirectoryLock, ensure_dir
from memsvc.core.errors import InvalidSetting
from memsvc.core.replies import REPLY_SLACK
from memsvc.net import descriptors
from memsvc.rpc import auth
from memsvc.rpc.access import Access, Admission
from memsvc.rpc.error_memory import ErrorMemoryServicer
from memsvc.rpc.fit import FitServicer
from memsvc.rpc.instrument import Metrics, Traces
from memsvc.rpc.malformed import MalformedRequests
from memsvc.rpc.memory import MemoryServicer
from memsvc.rpc.offload import FairPool
from memsvc.rpc.shards import ShardServicer
from memsvc.runtime import tracing
from memsvc.runtime.metrics import MetricsListener
from memsvc_client.v1 import (
    error_memory_pb2,
    error_memory_pb2_grpc,
    fit_pb2,
    fit_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    shards_pb2,
    shards_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    error_memory_pb2.DESCRIPTOR.services_by_name["ErrorMemoryService"].full_name,
    fit_pb2.DESCRIPTOR.services_by_name["FitService"].full_name,
    shards_pb2.DESCRIPTOR.services_by_name["ShardService"].full_name,
)
ERROR_MEMORY_SERVICE = SERVICE_NAMES[1]
ARCHIVE_HEALTH = "memsvc.archive"
"The health service name of the archive: NOT_SERVING while it is damaged (keyword search etc. refused)."
ARCHIVE_SESSIONS_HEALTH = "memsvc.archive.sessions"
"""NOT_SERVING while the archive refuses some session whose messages it could not store (the server log and
the archive_sessions_set_aside metric name them); every other session is served."""
TENANTS_FILE_HEALTH = "memsvc.tenants_file"
"""NOT_SERVING while the tenants file on disk is not in force (the log says why); the last good one serves."""
HEALTH_CHECK_SECONDS = 1.0
"How often the server looks at what it can do (a few stats) to keep its health statuses true."
DRAIN_SHARE, CLOSE_SHARE = 0.7, 0.2
"Of shutdown_grace_seconds, the shares in-flight calls and then flushing the stores get; the rest is for exiting."
SEARCH_WORKERS, SEARCHES_PER_SESSION, SEARCHES_IN_FLIGHT = 1, 8, 64
UNIX_PREFIX = "unix://"
EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)
"A second server must not silently share our TCP port."
ACK_GROWTH_BYTES = 32
"""How much larger one message's acknowledgement can be than the message in its Append: a one-character
message costs 7 bytes on the wire, its acknowledgement up to 26 (id and send time as 10-byte varints, role,
framing); a sender is echoed as it came, or out of a legacy header the content carried."""


PROBE_CONNECTIONS = 32
"""Most connections the health port and the metrics port each keep open (a sixteenth of the room, if less):
probes and scrapers need a few."""
MIN_CONNECTIONS = 8
"Fewer connections a listener than this, and the descriptor limit is too low to serve: the start fails."


class Connections(msgspec.Struct, frozen=True):
    main: int
    "Each main listener's: the gRPC server's (all of `listen` together) and each transport's (http_listen)."
    probes: int
    "The health port's and the metrics port's each."


def connection_limits(settings: Settings, transports: int, descriptors: int) -> Connections:
    """max_connections for each listener, lowered so that every listener full still leaves reserved_fds of
    the process's `descriptors` to storage."""
    room = descriptors - settings.reserved_fds
    probes = min(PROBE_CONNECTIONS, settings.max_connections, max(1, room // 16))
    ports = bool(settings.health_listen) + bool(settings.metrics_listen)
    main = min(settings.max_connections, (room - probes * ports) // (1 + transports))
    if main < MIN_CONNECTIONS:
        raise InvalidSetting(f"the descriptor limit ({descriptors}, ulimit -n) leaves too few for connections once "
                             f"reserved_fds ({settings.reserved_fds}) are kept for storage: raise the limit (systemd "
                             "LimitNOFILE) or lower reserved_fds")
    if main < settings.max_connections:
        log.warning("max_connections lowered to fit the descriptor limit", extra={
            "max_connections": main, "descriptor_limit": descriptors, "reserved_fds": settings.reserved_fds})
    return Connections(main, probes)


def _bounds(settings: Settings, connections: int) -> list[tuple[str, int]]:
    """A gRPC server's limits on its connections: how many, how long to handshake, how long idle."""
    return [
        ("grpc.max_allowed_incoming_connections", connections),
        ("grpc.server_handshake_timeout_ms", round(settings.header_timeout_seconds * 1000)),
        ("grpc.max_connection_idle_ms", round(settings.connection_idle_seconds * 1000)),
    ]


def _options(settings: Settings, connections: int) -> list[tuple[str, int]]:
    # The send limit is derived, never set: every reply carrying stored messages keeps within max_reply_bytes
    # (core/replies.py) with REPLY_SLACK for the rest, and an Append that fits the request limit always has room
    # for its acknowledgement: the reply of a stored Append must never be refused for its size.
    send_limit = max(settings.max_reply_bytes + REPLY_SLACK,
                     settings.max_request_bytes + ACK_GROWTH_BYTES * settings.max_messages_per_request)
    return [
        EXCLUSIVE_PORT,
        ("grpc.max_receive_message_length", settings.max_request_bytes),
        ("grpc.max_send_message_length", send_limit),
        *_bounds(settings, connections),
    ]


def _interceptors(settings: Settings, access: Access) -> list[grpc.aio.ServerInterceptor]:
    """Outermost first: metrics and traces see the calls admission refuses."""
    chain: list[grpc.aio.ServerInterceptor] = []
    if settings.metrics_listen:
        chain.append(Metrics())
    if settings.tracing_endpoint:
        chain.append(Traces())
    chain += [Admission(access), MalformedRequests()]
    return chain


def _bind(server: grpc.aio.Server, address: str, tls: grpc.ServerCredentials | None = None) -> str:
    """Bind one address (TCP with `tls` when given); returns it as bound (port 0 resolved)."""
    if address.startswith(UNIX_PREFIX):
        path = Path(address[len(UNIX_PREFIX):])
        ensure_dir(path.parent)
        # The data-dir lock proves no live server owns a socket left here.
        path.unlink(missing_ok=True)
        previous = os.umask(0o177)
        try:
            server.add_insecure_port(address)
        finally:
            os.umask(previous)
        return address
    try:
        port = server.add_secure_port(address, tls) if tls else server.add_insecure_port(address)
    except RuntimeError:  # grpcio raises where it used to return 0
        port = 0
    if port == 0:
        also = " (or tls_cert_file and tls_key_file are not a matching PEM certificate and key)" if tls else ""
        raise InvalidSetting(f"cannot listen on {address}: address in use or invalid{also}")
    host = address.rsplit(":", 1)[0]
    return f"{host}:{port}"


class Transport(Protocol):
    """Another way in to the same servicers (memsvc/http's HTTP/JSON listener)."""

    name: str
    "The key of its address in the `serving` log line."

    async def open(self, servicers: Mapping[str, object], max_connections: int, access: Access) -> str:
        """Start serving these servicers (service full name -> servicer) on at most `max_connections` connections
        at once, to callers `access` admits; returns the bound address."""

    async def close(self) -> None:
        """Stop accepting and drain in-flight calls, within shutdown_grace_seconds."""


class Server:
    """start() and stop() run on any event loop and leave nothing behind in the process (tests run servers
    in their own process this way); run() adds what belongs to the process: signals, the thread excepthook
    and the shutdown watchdog."""

    def __init__(self, settings: Settings, transports: Sequence[Transport] = ()):
        self.settings = settings
        self.transports = transports
        "Opened with the same servicer objects the gRPC server runs, after it starts; closed as it drains."
        self.lock = DirectoryLock(Path(settings.data_dir))
        self.health = health.aio.HealthServicer()
        self.stopping = asyncio.Event()
        self.app: App | None = None
        self.grpc: grpc.aio.Server | None = None
        self.probes: grpc.aio.Server | None = None
        "The health-only server of health_listen: plaintext, no token, no RPC limit, so probes always get through."
        self.metrics: MetricsListener | None = None
        self.searches = FairPool("search", workers=SEARCH_WORKERS, per_key=SEARCHES_PER_SESSION,
                                 total=SEARCHES_IN_FLIGHT)
        self.dead_threads: list[str] = []
        "Background threads that ended with an exception: the server then reports NOT_SERVING."
        self._watching: asyncio.Task[None] | None = None
        self._health_state: tuple[int, int, int, int, int] | None = None

    async def start(self) -> list[str]:
        self.lock.acquire()
        # Secrets are read before anything listens: a bad file fails the start, not the first call.
        access = auth.access_from_settings(self.settings)
        interceptors = _interceptors(self.settings, access)
        if self.settings.tracing_endpoint:
            tracing.start(self.settings.tracing_endpoint, self.settings.shard_name)
        tls = auth.server_credentials(self.settings)
        connections = connection_limits(self.settings, len(self.transports), descriptors.limit())
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        extra = {}
        if self.settings.health_listen:
            self.probes = grpc.aio.server(options=[EXCLUSIVE_PORT, *_bounds(self.settings, connections.probes)])
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.probes)
            extra["health"] = _bind(self.probes, self.settings.health_listen)
            await self.probes.start()
            log.info("health port open", extra={"address": extra["health"]})
        if self.settings.metrics_listen:
            self.metrics = MetricsListener(self.settings.metrics_listen, connections.probes,
                                           self.settings.header_timeout_seconds)
            extra["metrics"] = self.metrics.address
        self.grpc = grpc.aio.server(interceptors=interceptors, options=_options(self.settings, connections.main),
                                    maximum_concurrent_rpcs=self.settings.max_concurrent_rpcs)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        # Built off the event loop so the health port answers NOT_SERVING meanwhile.
        self.app = await asyncio.to_thread(App, self.settings, access.directory)
        memory = MemoryServicer(self.app, self.searches)
        lessons, fit, shards = ErrorMemoryServicer(self.app), FitServicer(self.app), ShardServicer(self.app)
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(memory, self.grpc)
        error_memory_pb2_grpc.add_ErrorMemoryServiceServicer_to_server(lessons, self.grpc)
        fit_pb2_grpc.add_FitServiceServicer_to_server(fit, self.grpc)
        shards_pb2_grpc.add_ShardServiceServicer_to_server(shards, self.grpc)
        reflection.enable_server_reflection(SERVICE_NAMES + (health.SERVICE_NAME, reflection.SERVICE_NAME),
                                            self.grpc)
        bound = [_bind(self.grpc, address, tls) for address in self.settings.listen]
        await self.grpc.start()
        servicers = dict(zip(SERVICE_NAMES, (memory, lessons, fit, shards), strict=True))
        for transport in self.transports:
            extra[transport.name] = await transport.open(servicers, connections.main, access)
        await self._update_health()
        self._watching = asyncio.create_task(self._watch_health())
        log.info("serving", extra={"addresses": bound, **extra, "max_connections": connections.main,
                                   "tls": tls is not None,
                                   "token": not access.open, "tenants": access.directory is not None,
                                   "data_dir": self.settings.data_dir,
                                   "pid": os.getpid()})
        return bound

    async def _set_health(self, status: int, archive: int | None = None, lessons: int | None = None,
                          archive_sessions: int | None = None, tenants_file: int | None = None) -> None:
        for name in ("",) + SERVICE_NAMES:
            await self.health.set(name, status)
        await self.health.set(ARCHIVE_HEALTH, status if archive is None else archive)
        await self.health.set(ERROR_MEMORY_SERVICE, status if lessons is None else lessons)
        await self.health.set(ARCHIVE_SESSIONS_HEALTH, status if archive_sessions is None else archive_sessions)
        await self.health.set(TENANTS_FILE_HEALTH, status if tenants_file is None else tenants_file)

    def thread_died(self, args: threading.ExceptHookArgs) -> None:
        """threading.excepthook: a background thread must never die silently."""
        name = args.thread.name if args.thread is not None else "?"
        log.critical("background thread died; the server reports NOT_SERVING until restarted",
                     exc_info=args.exc_value, extra={"thread": name})
        self.dead_threads.append(name)

    async def _update_health(self) -> None:
        assert self.app is not None
        problems = self.app.problems()
        broken = [problem.detail for problem in problems if problem.part == "data_dir"]
        broken += [f"background thread {name} died" for name in self.dead_threads]
        archive = [problem.detail for problem in problems if problem.part == "archive"]
        set_aside = [problem.detail for problem in problems if problem.part == "archive_session"]
        tenants_file = [problem.detail for problem in problems if problem.part == "tenants_file"]
        # The lesson database (lessons_backend = postgres) may be down while every session is served.
        lessons = await asyncio.to_thread(self.app.tenant().lessons.unavailable)
        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        state = (not_serving if broken else serving, not_serving if archive or broken else serving,
                 not_serving if lessons is not None or broken else serving,
                 not_serving if set_aside or archive or broken else serving,
                 not_serving if tenants_file or broken else serving)
        if state != self._health_state:
            if broken:
                log.error("not serving", extra={"problems": broken})
            elif self._health_state is not None:
                log.info("serving again" if not archive else "serving without the archive",
                         extra={"archive": archive})
            if lessons is not None:
                log.error("error memory not serving", extra={"reason": lessons.reason})
            if set_aside:
                log.error("the archive refuses sessions whose messages it could not store", extra={
                    "sessions": set_aside})
            self._health_state = state
            await self._set_health(*state)

    async def _watch_health(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_CHECK_SECONDS)
            try:
                await self._update_health()
            except Exception:
                log.exception("health check failed")

    async def stop(self) -> None:
        """Refuse new calls, drain in-flight ones, flush every store: all within shutdown_grace_seconds."""
        grace = self.settings.shutdown_grace_seconds
        log.info("stopping", extra={"grace_seconds": grace})
        loop = asyncio.get_running_loop()
        closed_by = loop.time() + grace * (DRAIN_SHARE + CLOSE_SHARE)
        if self._watching is not None:
            self._watching.cancel()
        await self.health.enter_graceful_shutdown()
        draining = [transport.close() for transport in self.transports]
        if self.grpc is not None:
            draining.append(self.grpc.stop(grace * DRAIN_SHARE))
        await asyncio.gather(*draining)
        self.searches.close()
        if self.app is not None:
            try:
                left = max(0.0, closed_by - loop.time())
                await asyncio.wait_for(asyncio.to_thread(self.app.close, left), left + grace * 0.05)
            except TimeoutError:
                log.error("stores still flushing at the end of shutdown_grace_seconds; what was not committed "
                          "is recovered at the next start")
        if self.probes is not None:
            await self.probes.stop(None)
        if self.metrics is not None:
            self.metrics.close()
        tracing.stop()
        self.lock.release()
        log.info("stopped")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        threading.excepthook = self.thread_died
        await self.start()
        await self.stopping.wait()
        # Whatever hangs (a thread stuck in a call, a store that will not flush), the process ends in time;
        # armed here, not in stop(), because ending the process is the process's business, not the server's.
        grace = self.settings.shutdown_grace_seconds
        watchdog = threading.Timer(grace, _exit_late, args=(grace,))
        watchdog.daemon = True
        watchdog.start()
        await self.stop()


def _exit_late(grace: float) -> None:
    log.error("shutdown took longer than shutdown_grace_seconds; exiting now", extra={"grace_seconds": grace})
    os._exit(1)


def serve(settings: Settings, transports: Sequence[Transport] = ()) -> int:
    # Caps the GIL convoy a busy thread (a search scoring a long history, a background worker)
    # inflicts on the event loop: it waits at most this long for the GIL each time it needs it.
    sys.setswitchinterval(0.0001)
    try:
        asyncio.run(Server(settings, transports).run())
    except InvalidSetting as exc:
        log.error("cannot start", extra={"reason": str(exc)})
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the data directory cannot be read or written: a person must fix it
        log.error("cannot start", extra={"reason": str(exc)})
        print(f"memsvc: cannot start: {exc}", file=sys.stderr)
        return 2
    return 0
