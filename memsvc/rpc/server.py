"""The server's lifecycle: lock the data directory, assemble the domain,
bind, serve health and reflection (and the health-only and metrics ports,
and the other transports it is handed, such as memsvc/http), and drain on
SIGTERM.

Owns the order of start and stop. Must never hold request logic.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memsvc.app import App
from memsvc.core.config import Settings
from memsvc.core.durable import DirectoryLock, ensure_dir
from memsvc.core.errors import InvalidSetting
from memsvc.rpc import auth
from memsvc.rpc.error_memory import ErrorMemoryServicer
from memsvc.rpc.instrument import Metrics
from memsvc.rpc.malformed import MalformedRequests
from memsvc.rpc.memory import MemoryServicer
from memsvc.rpc.shards import ShardServicer
from memsvc.runtime.metrics import MetricsListener
from memsvc_client.v1 import (
    error_memory_pb2,
    error_memory_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    shards_pb2,
    shards_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    error_memory_pb2.DESCRIPTOR.services_by_name["ErrorMemoryService"].full_name,
    shards_pb2.DESCRIPTOR.services_by_name["ShardService"].full_name,
)
ERROR_MEMORY_SERVICE = SERVICE_NAMES[1]
LESSONS_HEALTH_SECONDS = 2.0
"How often the health of ErrorMemoryService (its database's, with lessons_backend = postgres) is looked at."
UNIX_PREFIX = "unix://"
EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)
"A second server must not silently share our TCP port."


def _options(settings: Settings) -> list[tuple[str, int]]:
    return [
        EXCLUSIVE_PORT,
        ("grpc.max_receive_message_length", settings.max_request_bytes),
        ("grpc.max_send_message_length", settings.max_request_bytes),
    ]


def _interceptors(settings: Settings) -> list[grpc.aio.ServerInterceptor]:
    """Outermost first: metrics see the calls the token check refuses."""
    chain: list[grpc.aio.ServerInterceptor] = []
    if settings.metrics_listen:
        chain.append(Metrics())
    if settings.token_file:
        chain.append(auth.BearerToken(auth.read_token(settings.token_file)))
    chain.append(MalformedRequests())
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
    """Another way in to the same servicers, in this process (memsvc/http's listener is one)."""

    name: str
    "The key of its address in the `serving` log line."

    async def open(self, servicers: Mapping[str, object]) -> str:
        """Start serving these servicers (service full name -> servicer); returns the bound address."""

    async def close(self) -> None:
        """Stop accepting and drain in-flight calls, within shutdown_grace_seconds."""


class Server:
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
        self.lessons_watch: asyncio.Task[None] | None = None

    async def start(self) -> list[str]:
        self.lock.acquire()
        # Secrets are read before anything listens: a bad file fails the start, not the first call.
        interceptors = _interceptors(self.settings)
        tls = auth.server_credentials(self.settings)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        extra = {}
        if self.settings.health_listen:
            self.probes = grpc.aio.server(options=[EXCLUSIVE_PORT])
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.probes)
            extra["health"] = _bind(self.probes, self.settings.health_listen)
            await self.probes.start()
            log.info("health port open", extra={"address": extra["health"]})
        if self.settings.metrics_listen:
            self.metrics = MetricsListener(self.settings.metrics_listen)
            extra["metrics"] = self.metrics.address
        self.grpc = grpc.aio.server(interceptors=interceptors, options=_options(self.settings),
                                    maximum_concurrent_rpcs=self.settings.max_concurrent_rpcs)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        # Built off the event loop so the health port answers NOT_SERVING meanwhile.
        self.app = await asyncio.to_thread(App, self.settings)
        memory, lessons, shards = MemoryServicer(self.app), ErrorMemoryServicer(self.app), ShardServicer(self.app)
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(memory, self.grpc)
        error_memory_pb2_grpc.add_ErrorMemoryServiceServicer_to_server(lessons, self.grpc)
        shards_pb2_grpc.add_ShardServiceServicer_to_server(shards, self.grpc)
        reflection.enable_server_reflection(SERVICE_NAMES + (health.SERVICE_NAME, reflection.SERVICE_NAME),
                                            self.grpc)
        bound = [_bind(self.grpc, address, tls) for address in self.settings.listen]
        await self.grpc.start()
        servicers = dict(zip(SERVICE_NAMES, (memory, lessons, shards), strict=True))
        for transport in self.transports:
            extra[transport.name] = await transport.open(servicers)
        lessons_serving = await self._lessons_serving(None)
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        if not lessons_serving:
            await self.health.set(ERROR_MEMORY_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.lessons_watch = asyncio.create_task(self._watch_lessons(lessons_serving))
        log.info("serving", extra={"addresses": bound, **extra, "tls": tls is not None,
                                   "token": bool(self.settings.token_file), "data_dir": self.settings.data_dir,
                                   "pid": os.getpid()})
        return bound

    async def _set_health(self, status: int) -> None:
        for name in ("",) + SERVICE_NAMES:
            await self.health.set(name, status)

    async def _lessons_serving(self, was_serving: bool | None) -> bool:
        """Whether error memory can answer (its database is reachable); logs each change."""
        assert self.app is not None
        problem = await asyncio.to_thread(self.app.lessons.unavailable)
        if problem is not None and was_serving is not False:
            log.error("error memory not serving", extra={"reason": problem.reason})
        elif problem is None and was_serving is False:
            log.info("error memory serving again")
        return problem is None

    async def _watch_lessons(self, serving: bool) -> None:
        """ErrorMemoryService's own health follows its store; the other services do not depend on it."""
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), LESSONS_HEALTH_SECONDS)
            except TimeoutError:
                pass
            if self.stopping.is_set():
                return
            now_serving = await self._lessons_serving(serving)
            if now_serving != serving:
                serving = now_serving
                await self.health.set(ERROR_MEMORY_SERVICE, health_pb2.HealthCheckResponse.SERVING if serving
                                      else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def stop(self) -> None:
        """Refuse new calls, drain in-flight ones, flush every store."""
        log.info("stopping", extra={"grace_seconds": self.settings.shutdown_grace_seconds})
        self.stopping.set()
        if self.lessons_watch is not None:
            await self.lessons_watch
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        draining = [transport.close() for transport in self.transports]
        if self.grpc is not None:
            draining.append(self.grpc.stop(self.settings.shutdown_grace_seconds))
        await asyncio.gather(*draining)
        if self.app is not None:
            self.app.close()
        if self.probes is not None:
            await self.probes.stop(None)
        if self.metrics is not None:
            self.metrics.close()
        self.lock.release()
        log.info("stopped")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        await self.start()
        await self.stopping.wait()
        await self.stop()


def serve(settings: Settings, transports: Sequence[Transport] = ()) -> int:
    # Caps the GIL convoy a busy background thread inflicts on the server's threads.
    sys.setswitchinterval(0.0005)
    try:
        asyncio.run(Server(settings, transports).run())
    except InvalidSetting as exc:
        log.error("cannot start", extra={"reason": str(exc)})
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    return 0
