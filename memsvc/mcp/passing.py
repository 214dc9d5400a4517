"""`memsvc mcp --http --pass-token`: each MCP client's own bearer token, passed on to memsvc.

Owns the memsvc client of each token MCP clients present (so a tool call acts with its caller's tenant
and role, never the MCP server's) and of the tenant its request names in `memsvc-tenant` (an admin of
every tenant's choice, passed on too), checking a token the first time it is presented (memsvc refusing
it with UNAUTHENTICATED is a 401 here, before any tool runs), and closing those clients. Must never log,
store on disk or echo a token, and never decide who may do what: memsvc checks every call itself, so a
token revoked after its first use is refused by memsvc on its next tool call.
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

from memsvc_client import AsyncClient, MemsvcError, UnauthenticatedError

MOST_CALLERS = 64
"""Clients (one channel each) kept for the tokens presented most recently; an older one is closed and
made again (and its token checked again) when its token comes back."""
TENANT_HEADER = b"memsvc-tenant"
"The request header naming the tenant an admin of every tenant acts for, as memsvc's own."

_NAMED: contextvars.ContextVar[str] = contextvars.ContextVar("memsvc_mcp_tenant", default="")
"The tenant the current HTTP request names ('' for none): current for its tool calls, as its token is."


class NamedTenant:
    """ASGI middleware around the MCP app: the `memsvc-tenant` header of each request, current for it."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        named = dict(scope.get("headers") or ()).get(TENANT_HEADER, b"").decode("latin-1").strip()
        current = _NAMED.set(named)
        try:
            await self.app(scope, receive, send)
        finally:
            _NAMED.reset(current)


class CallersClients:
    """A memsvc client per presented token (and tenant named), and the MCP SDK's TokenVerifier deciding which
    tokens those are.

    Tools call memsvc through it as through one client: each call goes out on its caller's."""

    def __init__(self, target: str, options: dict[str, Any], most: int = MOST_CALLERS):
        self.target, self.most = target, most
        self.options = {name: value for name, value in options.items() if name != "token"}
        self.clients: OrderedDict[tuple[str, str], AsyncClient] = OrderedDict()
        "(token, tenant named or '') -> its client."

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token, if memsvc does not refuse it as unknown or expired (a memsvc out of reach refuses
        nothing here: its tool calls say so)."""
        caller = (token, _NAMED.get())
        if caller not in self.clients:
            client = AsyncClient(self.target, token=token, **{**self.options, "tenant": caller[1] or None})
            try:
                # Every role may read: the cheapest call any known token may make.
                await client.list_sessions(page_size=1)
            except UnauthenticatedError:
                await client.close()
                return None
            except MemsvcError:
                pass
            if caller in self.clients:  # checked meanwhile for a request of its own: keep one client
                await client.close()
            else:
                self.clients[caller] = client
                while len(self.clients) > self.most:
                    _, oldest = self.clients.popitem(last=False)
                    await oldest.close()
        if caller in self.clients:  # the most recently presented is the last evicted
            self.clients.move_to_end(caller)
        return AccessToken(token=token, client_id="memsvc-mcp", scopes=[])

    def __getattr__(self, name: str) -> Any:
        """The current tool call's caller's client's method `name`."""
        presented = get_access_token()
        client = self.clients.get((presented.token, _NAMED.get())) if presented else None
        if client is None:  # the SDK's bearer check verified it; evicted since, or no HTTP request at all
            raise ToolError("UNAUTHENTICATED: present your memsvc token again (Authorization: Bearer <token>)")
        return getattr(client, name)

    async def close(self) -> None:
        while self.clients:
            _, client = self.clients.popitem()
            await client.close()
