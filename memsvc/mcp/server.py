"""`memsvc mcp`: the MCP server, over stdio or streamable HTTP, in front of a running memsvc.

Owns assembling the MCP SDK's server (`mcp.server.mcpserver.MCPServer`) with the tools of
`tools`, its asyncio memsvc client (made inside the server's event loop, closed when it
stops), and choosing the transport. Must never write to stdout itself: over stdio, stdout
carries the protocol.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from memsvc.mcp.tools import CHAT_HISTORY, LOOKUP, RECORD, Tools
from memsvc_client import AsyncClient, __version__

INSTRUCTIONS = """memsvc keeps this conversation's memory beyond your context window and the lessons
learned from tool failures in every session. Use chat_history to look back (search, or read
the window and the rolling summary), lookup_error_lessons before retrying a failed tool call,
and record_error_lesson once a failure is fixed."""


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


def build(target: str, client_options: dict[str, Any], session: str) -> MCPServer[Any]:
    """The server, its tools talking to `target` (`client_options` go to AsyncClient)."""
    memory = LoopClient(target, client_options)
    tools = Tools(memory, session)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await memory.close()

    server: MCPServer[Any] = MCPServer("memsvc", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
                                       log_level="WARNING")
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


def serve(target: str, client_options: dict[str, Any], session: str, http: str | None, path: str) -> int:
    """Serve over stdio, or streamable HTTP on `http` ("HOST:PORT") at `path`, until stopped."""
    server = build(target, client_options, session)
    if http:
        host, _, port = http.rpartition(":")
        server.run("streamable-http", host=host.strip("[]") or "127.0.0.1", port=int(port), streamable_http_path=path)
    else:
        server.run("stdio")
    return 0
