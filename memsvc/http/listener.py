"""The HTTP listener of `http_listen`: the contract and the dashboard on one port, in the server's process.

Owns the port (bound once, refused clearly when taken), TLS from the same
`tls_*` files as the gRPC listeners, the routing of contract paths to the
Connect application and of everything else to the dashboard, the listener's
bounds (connections, header, body and idle time: memsvc/net/http11.py keeps
to them), and its start and graceful stop. uvicorn serves it on the server's own
event loop: an idle listener costs the gRPC calls nothing (no timer, no
thread), and an HTTP call runs the servicers exactly as a gRPC call does.
Must never hold request logic, nor log requests (paths and queries may carry
conversation text).
"""

from __future__ import annotations

import logging
import math
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn

from memsvc.app import App
from memsvc.core.config import Settings
from memsvc.core.errors import InvalidSetting, PermissionDenied
from memsvc.core.reasons import Reason
from memsvc.http.contract import Contract
from memsvc.http.dashboard import Dashboard
from memsvc.http.gate import Gate
from memsvc.http.history import PATH as HISTORY_PATH
from memsvc.http.history import HistoryEndpoint
from memsvc.http.hosts import AllowedHosts
from memsvc.net import http11
from memsvc.rpc.access import Access
from memsvc.rpc.server import SERVICE_NAMES

log = logging.getLogger(__name__)


def _bind(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise InvalidSetting(f"http_listen must be HOST:PORT, got {address!r}")
    try:
        return http11.bind(host, int(port))
    except OSError as exc:
        raise InvalidSetting(f"cannot listen on http_listen {address}: {exc.strerror}") from exc


def _tls(settings: Settings) -> Callable[[uvicorn.Config, Callable[[], ssl.SSLContext]], ssl.SSLContext] | None:
    """The TLS context of the gRPC listeners' files, mutual when tls_client_ca_file is set; None when TLS is off."""
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
        if settings.tls_client_ca_file:
            context.load_verify_locations(settings.tls_client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise InvalidSetting(f"the HTTP listener cannot use tls_cert_file, tls_key_file or tls_client_ca_file: "
                             f"{exc}") from exc
    return lambda _config, _default: context


class Routes:
    """The contract's paths (`/<service>/...`) to the Connect application, the metrics history's to its endpoint,
    every other path to the dashboard."""

    def __init__(self, services: list[str], contract: Contract, dashboard: Dashboard, hosts: AllowedHosts,
                 history: HistoryEndpoint):
        self.prefixes = tuple(f"/{name}/" for name in services)
        self.contract = contract
        self.dashboard = dashboard
        self.hosts = hosts
        self.history = history

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        host = dict(scope.get("headers", ())).get(b"host", b"").decode("latin-1")
        if not self.hosts.admits(host):
            await self.contract.refuse(PermissionDenied(self.hosts.refusal(host), reason=Reason.HOST_NOT_ALLOWED), send)
        elif scope["path"].startswith(self.prefixes):
            await self.contract(scope, receive, send)
        elif scope["path"] == HISTORY_PATH:
            await self.history(scope, receive, send)
        else:
            await self.dashboard(scope, receive, send)


class HttpListener:
    """Opened by rpc/server.py once the gRPC server listens; closed while the gRPC server drains."""

    name = "http"

    def __init__(self, settings: Settings):
        # Secrets and files are read now, before anything listens: a bad one fails the start.
        self.settings = settings
        self.tls = _tls(settings)
        self.dashboard = Dashboard()
        self.server: http11.BoundedServer | None = None

    async def open(self, servicers: Mapping[str, object], max_connections: int, access: Access) -> str:
        """Serve `servicers` (service full name -> the gRPC server's servicer) on at most `max_connections`
        connections at once; returns the bound HOST:PORT."""
        settings = self.settings
        gate = Gate(access, settings.max_concurrent_rpcs)
        contract = Contract(servicers, gate, settings.max_request_bytes)
        hosts = AllowedHosts(settings.http_allowed_hosts, token_required=not access.open)
        # The memory servicer holds the App: its history is the one the server samples.
        app: App = servicers[SERVICE_NAMES[0]].app  # type: ignore[attr-defined]
        history = HistoryEndpoint(app.history, gate, contract)
        config = uvicorn.Config(
            Routes(list(servicers), contract, self.dashboard, hosts, history), http="h11", ws="none", lifespan="off",
            interface="asgi3", log_config=None, access_log=False, proxy_headers=False, server_header=False,
            date_header=False, ssl_context_factory=self.tls,
            timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_seconds))
        listener = _bind(settings.http_listen)
        limits = http11.Limits(max_connections, settings.header_timeout_seconds, settings.body_timeout_seconds,
                               settings.connection_idle_seconds)
        # Started, not served: serve() would take SIGTERM from the gRPC server, which drains both.
        self.server = http11.BoundedServer(config, listener, limits, "http")
        await self.server.startup()
        host, port = listener.getsockname()[:2]
        bound = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        log.info("http listener open", extra={"address": bound, "tls": self.tls is not None})
        return bound

    async def close(self) -> None:
        """Stop accepting, let in-flight calls finish (up to shutdown_grace_seconds), close."""
        if self.server is not None:
            await self.server.shutdown()
