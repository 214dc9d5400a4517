"""The OpenAI Agents SDK's `Session` protocol (openai-agents) kept in memsvc.

Owns how an Agents SDK item (a `TResponseInputItem` dict) is stored: the item itself, as
`json.dumps` writes it (as the SDK's own SQLiteSession does), in payload_json, from which it is
read back exactly; its role (a message's own, "developer" as system; tool and function calls and
reasoning as assistant; every `*_output` item as tool); and its text as memsvc's content, what
search, the window and the summary read (a message's text, a call's name and arguments, a tool's
output, a reasoning summary; else the item's type). Items stored without a payload (by another
client) come back as `{"role", "content"}` messages. Needs the `openai-agents` extra:
`pip install 'memsvc-client[openai-agents]'`. Must never reach memsvc but through the client.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

try:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("memsvc_client.openai_agents needs openai-agents: pip install 'memsvc-client[openai-agents]'") \
        from missing

from memsvc_client.aio import AsyncClient
from memsvc_client.errors import NotFoundError
from memsvc_client.results import Message
from memsvc_client.transcript import every_message_async, newest_async

__all__ = ["MemsvcSession"]

MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class MemsvcSession:
    """One memsvc session as an Agents SDK session: `Runner.run(agent, input, session=MemsvcSession(...))`.

    `client` is an `AsyncClient` the caller owns (and closes). `session_settings.limit` is the default
    of `get_items`. `clear_session` is a Reset of the session: `reset_mode` "all" (the default) also
    deletes the rolling summary, "summary" keeps it. `pop_item` deletes the newest item from every
    store memsvc has (history, archive, vectors) in one DeleteMessages.
    """

    def __init__(self, session_id: str, client: AsyncClient, *, session_settings: SessionSettings | None = None,
                 reset_mode: str = "all"):
        self.session_id = session_id
        self.client = client
        self.session_settings = session_settings
        self.reset_mode = reset_mode

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: all of them, or the newest `limit` (SQLiteSession's
        reading of a limit: 0 gives none, a negative one all)."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is None or limit < 0:
            stored = await every_message_async(self.client, self.session_id)
        else:
            stored = await newest_async(self.client, self.session_id, limit)
        return [to_item(message) for message in stored]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items in one Append: durable when this returns."""
        if items:
            await self.client.append(self.session_id, [to_memsvc(item) for item in items])

    async def pop_item(self) -> TResponseInputItem | None:
        """Delete the newest item from every store and return it; None when the session has none."""
        try:
            popped = await self.client.delete_messages(self.session_id, last=1)
        except NotFoundError:
            return None
        return to_item(popped.messages[0]) if popped.messages else None

    async def clear_session(self) -> None:
        try:
            await self.client.reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass  # never written: nothing to clear


def to_memsvc(item: TResponseInputItem) -> dict[str, Any]:
    """The memsvc message of an item: its role, its searchable text, and the item itself as payload."""
    fields = cast("dict[str, Any]", item)
    return {"role": role_of(fields), "content": text_of(fields), "send_at_unix_nano": time.time_ns(),
            "payload_json": json.dumps(item)}


def role_of(item: dict[str, Any]) -> str:
    if "role" in item:
        return MESSAGE_ROLES.get(str(item["role"]), "user")
    return "tool" if str(item.get("type", "")).endswith("_output") else "assistant"


def text_of(item: dict[str, Any]) -> str:
    """What memsvc searches, embeds and summarizes of an item."""
    kind = str(item.get("type", "message"))
    if "content" in item:
        text = _texts(item["content"])
    elif kind == "function_call":
        text = f"{item.get('name', '')}({item.get('arguments', '')})"
    elif "output" in item:
        text = _texts(item["output"])
    else:
        text = _texts(item.get("summary", []))
    return text if text.strip() else f"[{kind}]"


def _texts(value: Any) -> str:
    """A string as it is; the `text` (or `refusal`) of each part of a list of content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = (part.get("text") or part.get("refusal") for part in value if isinstance(part, dict))
        return "\n".join(part for part in parts if isinstance(part, str))
    return ""


def to_item(message: Message) -> TResponseInputItem:
    """The item stored in `message`'s payload; a message without one becomes a message item of its role."""
    if message.payload_json:
        stored = json.loads(message.payload_json)
        if isinstance(stored, dict):
            return cast(TResponseInputItem, stored)
    role = message.role if message.role in ("user", "assistant", "system") else "user"
    return cast(TResponseInputItem, {"role": role, "content": message.content})
