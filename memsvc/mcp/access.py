"""Who may use `memsvc mcp`, and which sessions its tools may touch.

Owns the sessions an MCP server is configured for (its own `--session`, others by name, or by prefix), the
refusal a tool call naming any other session gets (a tool error the agent reads, over stdio and HTTP
alike: a prompt-injected agent must not read other conversations), the bearer tokens an MCP client must
present over HTTP (the MCP server's own, or else memsvc's), and that streamable HTTP without either is
served on a loopback address only. Must never reach memsvc: the tools do, through the client.

With --pass-token, passing.py decides instead: each client presents its own memsvc token (its tenant
and role), which the tools pass on.
"""

from __future__ import annotations

import hmac
import ipaddress

import msgspec
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError

LOOPBACK_NAMES = ("localhost",)


class Scope(msgspec.Struct, frozen=True):
    """The sessions the tools may touch: `own` (the default of a call naming none), `named`, and every
    session whose id starts with one of `prefixes` ("" for every session)."""

    own: str = ""
    named: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def configured(cls, own: str, named: list[str], prefixes: list[str]) -> Scope:
        scope = cls(own, tuple(dict.fromkeys(named)), tuple(dict.fromkeys(prefixes)))
        if not (own or named or prefixes):
            raise ValueError("say which sessions the tools may touch: --session ID (the agent's own), "
                             "--allow-session ID for others (repeatable), or --allow-session-prefix PREFIX "
                             "(repeatable; --allow-session-prefix '' allows every session)")
        return scope

    def allows(self, session_id: str) -> bool:
        return session_id == self.own or session_id in self.named or session_id.startswith(self.prefixes)

    def session(self, session_id: str) -> str:
        """The session a tool call touches: the one it names, else the agent's own; a ToolError if not allowed."""
        chosen = session_id or self.own
        if not chosen:
            raise ToolError("INVALID_ARGUMENT SESSION_REQUIRED: pass session_id, one of " + self.described()
                            + " (this MCP server was started without --session)")
        if not self.allows(chosen):
            raise ToolError(f"PERMISSION_DENIED SESSION_NOT_ALLOWED: this MCP server's tools may touch only "
                            f"{self.described()}; {chosen!r} is not one of them")
        return chosen

    def described(self) -> str:
        if "" in self.prefixes:
            return "every session"
        parts = [repr(name) for name in (self.own, *self.named) if name]
        parts += [f"sessions whose id starts with {prefix!r}" for prefix in self.prefixes]
        return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


class BearerTokens:
    """The MCP SDK's TokenVerifier for the tokens an MCP client may present over HTTP."""

    def __init__(self, accepted: list[str]):
        self.accepted = [token.encode() for token in accepted]

    async def verify_token(self, token: str) -> AccessToken | None:
        presented = token.encode()
        if any(hmac.compare_digest(presented, accepted) for accepted in self.accepted):
            return AccessToken(token=token, client_id="memsvc-mcp", scopes=[])
        return None


def http_tokens(host: str, own: str | None, memsvc: str | None) -> list[str]:
    """The tokens an MCP client must present over HTTP on `host`: the MCP server's own, else memsvc's; none
    only on a loopback address (ValueError elsewhere)."""
    if own or memsvc:
        return [own or memsvc or ""]
    if not loopback(host):
        raise ValueError(f"refusing to serve MCP over HTTP on {host} without a credential: anyone who reaches the "
                         "port could read every session it allows; pass --http-token-file (the token MCP clients "
                         "must present) or --token-file (memsvc's, which they then present), or bind a loopback "
                         "address such as 127.0.0.1")
    return []


def loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False
