"""`memsvc mcp`: the MCP server, over stdio or streamable HTTP, in front of a running memsvc.

Owns assembling the MCP SDK's server (`mcp.server.mcpserver.MCPServer`) with the tools of
`tools`, its asyncio memsvc client (made inside the server's event loop, closed when it
stops), choosing the transport, and serving streamable HTTP within bounds (memsvc/net:
connections, header, body and idle time) behind the SDK's bearer-token check (access.py
says which tokens; with --pass-token, passing.py: each MCP client's own, passed on to
memsvc). Must never write to stdout itself: over stdio, stdout carries the protocol.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl

from memsvc.mcp.access import BearerTokens, Scope, http_tokens
from memsvc.mcp.passing import CallersClients, NamedTenant
from memsvc.mcp.tools import CHAT_HISTORY, LOOKUP, RECORD, Tools
from memsvc.net import descriptors, http11
from memsvc_client import AsyncClient, __version__

INSTRUCTIONS = """memsvc keeps this conversation's memory beyond your context window and the lessons
learned from tool failures in every session. Use chat_history to look back (search, or read
the window and the rolling summary), lookup_error_lessons before retrying a failed tool call,
and record_error_lesson once a failure is fixed."""
LIMITS = http11.Limits(max_connections=64, header_seconds=10.0, body_seconds=60.0, idle_seconds=60.0)
"Streamable HTTP's bounds unless the command line says otherwise: an agent holds a connection or two."
BOUNDS = {"max_connections": "max_connections", "header_timeout_seconds": "header_seconds",
          "body_timeout_seconds": "body_seconds", "connection_idle_seconds": "idle_seconds"}
"The command line's names of LIMITS' fields (the names memsvc serve's settings have)."
RESERVED_FDS = 32
"Descriptors connections never take: the client's channel to memsvc, the event loop's own."


class LoopClient:
    """The tools' client, opened in the server's event loop: grpc.aio channels belong to one loop."""

    def __init__(self, target: str, options: dict[str, Any]):
        self.target, self.options = target, options
        self.client: AsyncClient | None = None

    def __getattr__(self, name: str) -> Any:
        if self.client is None:
            self.client = AsyncClient(self.target, **self.options)
        return getattr(self.client, name)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()


def build(target: str, client_options: dict[str, Any], scope: Scope, tokens: BearerTokens | None = None,
          url: str = "", pass_token: bool = False) -> MCPServer[Any]:
    """The server, its tools talking to `target` (`client_options` go to AsyncClient) about the sessions of
    `scope`; with `tokens`, every HTTP request at `url` must carry one of them; with `pass_token`, every HTTP
    request carries its caller's memsvc token, and the tools call memsvc with it."""
    memory: LoopClient | CallersClients = (CallersClients(target, client_options) if pass_token
                                           else LoopClient(target, client_options))
    verifier = memory if isinstance(memory, CallersClients) else tokens
    tools = Tools(memory, scope)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await memory.close()

    # The SDK's bearer check; issuer_url is required by its settings but unused without an OAuth provider.
    auth = AuthSettings(issuer_url=AnyHttpUrl(url), resource_server_url=None) if verifier else None
    server: MCPServer[Any] = MCPServer("memsvc", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
                                       log_level="WARNING", auth=auth, token_verifier=verifier)
    reads = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    server.add_tool(tools.chat_history, name="chat_history", title="Chat history", description=CHAT_HISTORY,
                    annotations=reads, structured_output=True)
    server.add_tool(tools.lookup_error_lessons, name="lookup_error_lessons", title="Look up error lessons",
                    description=LOOKUP, annotations=reads, structured_output=True)
    server.add_tool(tools.record_error_lesson, name="record_error_lesson", title="Record an error lesson",
                    description=RECORD, structured_output=True,
                    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                                open_world_hint=False))
    return server


def serve(target: str, client_options: dict[str, Any], scope: Scope, http: str | None, path: str,
          http_token: str | None = None, bounds: dict[str, float] | None = None, pass_token: bool = False) -> int:
    """Serve over stdio, or streamable HTTP on `http` ("HOST:PORT") at `path`, until stopped. Over HTTP a
    client presents `http_token`, else memsvc's token (`client_options["token"]`); with neither, only a
    loopback address is served (ValueError otherwise, before anything listens). With `pass_token` (HTTP
    only, and neither token then) each client presents its own memsvc token, which the tools pass on.
    `bounds` override LIMITS (by their command-line names)."""
    if pass_token:
        _check_passing(http, http_token, client_options.get("token"))
    if not http:
        build(target, client_options, scope).run("stdio")
        return 0
    host, _, port = http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        raise ValueError(f"--http must be HOST:PORT, got {http!r}")
    accepted = [] if pass_token else http_tokens(host, http_token, client_options.get("token"))
    limits = msgspec.structs.replace(LIMITS, **{BOUNDS[name]: value for name, value in (bounds or {}).items()})
    room = descriptors.limit() - RESERVED_FDS
    if room < 1:
        raise ValueError(f"the descriptor limit (ulimit -n) leaves no room for connections beside {RESERVED_FDS} "
                         "kept for the MCP server's own use: raise it")
    limits = msgspec.structs.replace(limits, max_connections=min(int(limits.max_connections), room))
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    server = build(target, client_options, scope, BearerTokens(accepted) if accepted else None, url, pass_token)
    app: Any = server.streamable_http_app(streamable_http_path=path, host=host)
    if pass_token:
        app = NamedTenant(app)
    config = uvicorn.Config(app, http="h11", ws="none", lifespan="on", log_level="warning", access_log=False,
                            server_header=False)
    anyio.run(http11.BoundedServer(config, http11.bind(host, int(port)), limits, "mcp").serve)
    return 0


def _check_passing(http: str | None, http_token: str | None, memsvc_token: str | None) -> None:
    """--pass-token is an HTTP server's, where each client's own token replaces every configured one."""
    if not http:
        raise ValueError("--pass-token passes on the token each MCP client presents over --http; over stdio the "
                         "MCP server calls memsvc with --token-file's")
    if http_token or memsvc_token:
        raise ValueError("with --pass-token each MCP client presents its own memsvc token, which is passed on: drop "
                         "--http-token-file and --token-file (they would not be used)")
