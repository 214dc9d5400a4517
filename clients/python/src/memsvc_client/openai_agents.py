"""The OpenAI Agents SDK's `Session` protocol (openai-agents) kept in memsvc.

Owns how an Agents SDK item (a `TResponseInputItem` dict) is stored: its role (a message's own,
"developer" as system; tool calls and reasoning as assistant; every `*_output` item as tool);
its text as memsvc's content, what search, the window and the summary read (a message's text, a
call's `name(arguments)`, a tool's output, a reasoning summary; else `[type]`); and the item
itself, less that text, in payload_json (`payloads`), from which it is read back equal to what
the SDK's SQLiteSession gives back. Needs the `openai-agents` extra:
`pip install 'memsvc-client[openai-agents]'`. Must never reach memsvc but through the client.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

try:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("memsvc_client.openai_agents needs openai-agents: pip install 'memsvc-client[openai-agents]'") \
        from missing

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.errors import NotFoundError
from memsvc_client.payloads import Path, Piece, pack, unpack
from memsvc_client.results import Message
from memsvc_client.transcript import every_message_async, newest_async, pop_newest_async

__all__ = ["MemsvcSession"]

MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
"""Tool call items, and the field holding what the call was given."""


class MemsvcSession:
    """One memsvc session as an Agents SDK session: `Runner.run(agent, input, session=MemsvcSession(...))`.

    `client` is an `AsyncClient` or a `Client` (whose asyncio twin is used) the caller owns and
    closes; the session works from any event loop and thread (`Runner.run`, `Runner.run_sync`,
    `asyncio.run` again). `session_settings` is a `SessionSettings` or a dict of its fields, as
    the SDK's own sessions take it (an unknown field raises TypeError); its `limit` is the default
    of `get_items`. `clear_session` is a Reset of the session: `reset_mode` "all" (the default)
    also deletes the rolling summary, "summary" keeps it. Once `close`d, as a closed SQLiteSession,
    every method raises RuntimeError.
    """

    def __init__(self, session_id: str, client: AsyncClient | Client, *,
                 session_settings: SessionSettings | dict[str, Any] | None = None, reset_mode: str = "all"):
        self.session_id = session_id
        self.client = client.twin(AsyncClient)
        self.session_settings = SessionSettings() if session_settings is None else \
            coerce_session_settings(session_settings)
        self.reset_mode = reset_mode
        self.closed = False

    def _refuse_closed(self) -> None:
        # SQLiteSession refuses every call once closed (an empty add_items too): code written for it
        # finds a call after close reported, not silently served.
        if self.closed:
            raise RuntimeError(f"MemsvcSession is closed (session {self.session_id!r})")

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: all of them, or the newest `limit` (SQLiteSession's
        reading of a limit: 0 gives none, a negative one all)."""
        self._refuse_closed()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None or limit < 0:
            stored = await every_message_async(self.client, self.session_id)
        else:
            stored = await newest_async(self.client, self.session_id, limit)
        return [to_item(message) for message in stored]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items in one Append, durable when this returns, all or none: a batch larger
        than one request is refused whole (ResourceExhaustedError, REQUEST_TOO_LARGE). Retried
        after UNAVAILABLE under one idempotency key, so a retry never stores an item twice."""
        self._refuse_closed()
        if items:
            await self.client.append(self.session_id, [to_memsvc(item) for item in items],
                                     idempotency_key=uuid.uuid4().hex)

    async def pop_item(self) -> TResponseInputItem | None:
        """Delete the newest item from every store (history, archive, vectors) and return it; None
        when the session has none. Deletes by id: a retry never deletes a second item, and pops
        running at once each get a different item."""
        self._refuse_closed()
        popped = await pop_newest_async(self.client, self.session_id)
        return None if popped is None else to_item(popped)

    def close(self) -> None:
        """End the session's use, as SQLiteSession's `close`: later calls raise RuntimeError. It holds nothing
        of its own to release (its calls go through the caller's client, which the caller closes)."""
        self.closed = True

    async def clear_session(self) -> None:
        self._refuse_closed()
        try:
            await self.client.reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass  # never written: nothing to clear


def to_memsvc(item: TResponseInputItem) -> dict[str, Any]:
    """The memsvc message of an item: its role, its text as content, the rest as payload."""
    fields = cast("dict[str, Any]", item)
    content, payload = pack(item, text_of(fields), f"[{fields.get('type', 'message')}]")
    return {"role": role_of(fields), "content": content, "send_at_unix_nano": time.time_ns(), "payload_json": payload}


def role_of(item: dict[str, Any]) -> str:
    if "role" in item:
        return MESSAGE_ROLES.get(str(item["role"]), "user")
    return "tool" if str(item.get("type", "")).endswith("_output") else "assistant"


def text_of(item: dict[str, Any]) -> list[Piece]:
    """What memsvc searches, embeds and summarizes of an item, piece by piece, each with its place."""
    kind = str(item.get("type", "message"))
    if "content" in item:
        return _texts(item["content"], ("content",))
    if kind in CALLS and isinstance(item.get("name"), str) and isinstance(item.get(CALLS[kind]), str):
        return [(item["name"], ("name",)), ("(", None), (item[CALLS[kind]], (CALLS[kind],)), (")", None)]
    if "output" in item:
        return _texts(item["output"], ("output",))
    return _texts(item.get("summary"), ("summary",))


def _texts(value: Any, path: Path) -> list[Piece]:
    """A string as it is; the `text` (or `refusal`) of each part of a list of parts, a line each."""
    if isinstance(value, str):
        return [(value, path)]
    pieces: list[Piece] = []
    for index, part in enumerate(value if isinstance(value, list) else ()):
        field = next((name for name in ("text", "refusal") if isinstance(part, dict)
                      and isinstance(part.get(name), str)), None)
        if field is not None:
            if pieces:
                pieces.append(("\n", None))
            pieces.append((part[field], (*path, index, field)))
    return pieces


def to_item(message: Message) -> TResponseInputItem:
    """The item stored in `message`; a message without a payload becomes a message item of its role."""
    if message.payload_json:
        stored = unpack(message.content, message.payload_json)
        if isinstance(stored, dict):
            return cast(TResponseInputItem, stored)
    role = message.role if message.role in ("user", "assistant", "system") else "user"
    return cast(TResponseInputItem, {"role": role, "content": message.content})
