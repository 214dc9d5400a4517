"""HTTP/1.1 served by uvicorn, with the bounds uvicorn and asyncio leave out.

Owns the accept loop of a listening socket (past `max_connections` open ones, new connections wait in the
kernel's queue and take no descriptor; an accept that fails for want of descriptors is retried after a
pause and said once per interval, where asyncio logs every attempt, thousands a second), a deadline for
each part of a request uvicorn reads (its headers, from the connection's start or from the request's first
byte; its body, from the end of its headers), and the keep-alive idle time. Must never hold what a request
means: the ASGI application it serves does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any, Literal

import h11
import msgspec
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from memsvc.net.descriptors import ACCEPT_RETRY_SECONDS, RESOURCE_ERRORS, ResourceLog

log = logging.getLogger(__name__)

Reading = Literal["headers", "body"]


class Limits(msgspec.Struct, frozen=True):
    max_connections: int
    "Connections open at once; past it new ones wait in the kernel's queue."
    header_seconds: float
    "From a connection's start, or from a request's first byte, until the request's headers are in."
    body_seconds: float
    "From a request's headers until its whole body is in."
    idle_seconds: float
    "Between requests on a connection kept alive."


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); OSError when the address cannot be had."""
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it a reply's later segments wait out the client's delayed ACK (~40 ms a call).
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT may be reused; a live port not
        listener.bind((host, port))
        listener.listen()
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on reading each request's headers and its body.

    uvicorn bounds only the idle time between requests (timeout_keep_alive): a connection that sends a
    request's headers, or its body, a byte at a time, or nothing at all, is otherwise held forever. The
    phase a connection is in is h11's view of the peer (`their_state`) on uvicorn's connection.
    """

    def __init__(self, *args: Any, limits: Limits, on_close: Callable[[], None], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits, self.on_close = limits, on_close
        self.reading: Reading | None = None
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._read("headers")  # a connection that never sends a request is closed too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._read(None)
        super().connection_lost(exc)
        self.on_close()

    def _follow(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._read("body")
        elif state is h11.IDLE and self.conn.trailing_data[0]:
            self._read("headers")  # part of a request is in
        elif state is not h11.IDLE:
            self._read(None)  # the request is in
        # Idle with nothing received: a new connection keeps its deadline for the headers; between requests,
        # uvicorn's keep-alive timer bounds the wait.

    def _read(self, reading: Reading | None) -> None:
        """Start the deadline of `reading`, unless it is already running (the first byte starts it, not the last)."""
        if reading == self.reading:
            return
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.reading = reading
        if reading is not None:
            seconds = self.limits.header_seconds if reading == "headers" else self.limits.body_seconds
            self.deadline = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self.deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class _Slot:
    """One connection's place under max_connections, given back once whichever way the connection ends."""

    def __init__(self, room: asyncio.Semaphore):
        self.room, self.held = room, True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.room.release()


class BoundedServer(uvicorn.Server):
    """uvicorn's server fed by an accept loop of its own that keeps to `limits` (its `timeout_keep_alive` is
    set from them). `serve()` runs it as uvicorn does; `startup()` and `shutdown()` run it on a loop that is
    already running."""

    def __init__(self, config: uvicorn.Config, listener: socket.socket, limits: Limits, name: str):
        config.timeout_keep_alive = max(1, round(limits.idle_seconds))
        if not config.loaded:
            config.load()
        super().__init__(config)
        self.lifespan = config.lifespan_class(config)  # what serve() sets; startup() needs it too
        self.listener, self.limits = listener, limits
        self.resources = ResourceLog(name)
        self._room = asyncio.Semaphore(limits.max_connections)
        self._accepting: asyncio.Task[None] | None = None
        self._opening: set[asyncio.Task[None]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the lifespan, and no listener of uvicorn's own
        self._accepting = asyncio.create_task(self._accept())

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        self.listener.close()
        await super().shutdown()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._room.acquire()
            try:
                connection, _ = await loop.sock_accept(self.listener)
            except OSError as error:
                self._room.release()
                if error.errno in RESOURCE_ERRORS:
                    self.resources.failed(error)
                    await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue  # else the peer gave up before the accept (ECONNABORTED and the like)
            task = loop.create_task(self._open(connection, _Slot(self._room)))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(self, connection: socket.socket, slot: _Slot) -> None:
        def protocol() -> GuardedH11:
            return GuardedH11(config=self.config, server_state=self.server_state, app_state=self.lifespan.state,
                              limits=self.limits, on_close=slot.release)
        tls = self.config.ssl
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                protocol, connection, ssl=tls, ssl_handshake_timeout=self.limits.header_seconds if tls else None)
        except Exception as error:  # a TLS handshake that failed or took too long: one connection's end
            log.debug("connection not opened", extra={"error": repr(error)})
            slot.release()
            connection.close()
