"""LangChain's chat message history (langchain-core's `BaseChatMessageHistory`) kept in memsvc.

Owns how a LangChain message is stored: its role (human -> user, ai -> assistant, system, tool and
function -> tool), its text as memsvc's content (what search, the window and the summary read: its
text blocks; a tool call's name and arguments when the message has no text), and the message as
`message_to_dict` writes it, less that text, in payload_json (`payloads`), from which it is read
back exactly: tool calls, ids, names, additional_kwargs, response_metadata, multimodal content.
Messages stored without a payload (by another client) come back as the message of their role.
Needs the `langchain` extra: `pip install 'memsvc-client[langchain]'`. Must never reach memsvc
but through the clients.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("memsvc_client.langchain needs langchain-core: pip install 'memsvc-client[langchain]'") \
        from missing

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.errors import NotFoundError
from memsvc_client.payloads import Piece, pack, unpack
from memsvc_client.results import Message
from memsvc_client.transcript import every_message, every_message_async

__all__ = ["MemsvcChatMessageHistory"]

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
"""LangChain message types (chunks too, less their "MessageChunk" suffix) to memsvc roles."""
CHAT_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system",
              "developer": "system", "tool": "tool", "function": "tool"}
"""A ChatMessage's free-form role to a memsvc role; any other is "user"."""
READ_BACK = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


class MemsvcChatMessageHistory(BaseChatMessageHistory):
    """The messages of one memsvc session, for `RunnableWithMessageHistory` and any LangChain code that
    takes a `BaseChatMessageHistory`.

    `client` is a `Client` or an `AsyncClient`, which the caller owns and closes: the blocking
    methods (`messages`, `add_messages`, `clear`) run on a `Client`, the asyncio ones
    (`aget_messages`, `aadd_messages`, `aclear`) on an `AsyncClient` on the caller's event loop,
    each the one given or its twin (`Connection.twin`), never on a thread of their own. `clear` is
    a Reset of the session: `reset_mode` "all" (the default) also deletes the rolling summary,
    "summary" keeps it.
    """

    def __init__(self, session_id: str, client: Client | AsyncClient, *, reset_mode: str = "all"):
        super().__init__()
        self.session_id = session_id
        self.client = client
        self.reset_mode = reset_mode

    # -- blocking --------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first, as LangChain stored it."""
        return [to_langchain(message) for message in every_message(self.client.twin(Client), self.session_id)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in one Append, durable when this returns; retried under one
        idempotency key, so a retry never stores a message twice."""
        if messages:
            self.client.twin(Client).append(self.session_id, [to_memsvc(message) for message in messages],
                                                idempotency_key=uuid.uuid4().hex)

    def clear(self) -> None:
        try:
            self.client.twin(Client).reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass  # never written: nothing to clear

    # -- asyncio ---------------------------------------------------------------

    async def aget_messages(self) -> list[BaseMessage]:
        stored = await every_message_async(self.client.twin(AsyncClient), self.session_id)
        return [to_langchain(message) for message in stored]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            await self.client.twin(AsyncClient).append(
                self.session_id, [to_memsvc(message) for message in messages], idempotency_key=uuid.uuid4().hex)

    async def aclear(self) -> None:
        try:
            await self.client.twin(AsyncClient).reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass


def to_memsvc(message: BaseMessage) -> dict[str, Any]:
    """The memsvc message of a LangChain message: role, its text as content, the rest as payload."""
    kind = message.type.removesuffix("MessageChunk").lower()
    if kind == "remove":
        raise ValueError("a RemoveMessage is an instruction, not a message: it cannot be stored")
    role = CHAT_ROLES.get(str(getattr(message, "role", "")).lower(), "user") if kind == "chat" else ROLES.get(kind)
    if role is None:
        raise ValueError(f"memsvc cannot store LangChain messages of type {message.type!r}")
    stand_in = calls_of(message) or f"[{message.type} message]"
    content, payload = pack(message_to_dict(message), text_of(message), stand_in)
    return {"role": role, "content": content, "send_at_unix_nano": time.time_ns(), "payload_json": payload}


def text_of(message: BaseMessage) -> list[Piece]:
    """The message's text (`message.text`: its string, or its text blocks joined), piece by piece,
    each with its place in `message_to_dict`'s output."""
    if isinstance(message.content, str):
        return [(message.content, ("data", "content"))]
    pieces: list[Piece] = []
    for index, block in enumerate(message.content):
        if isinstance(block, str):
            pieces.append((block, ("data", "content", index)))
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            pieces.append((block["text"], ("data", "content", index, "text")))
    return pieces


def calls_of(message: BaseMessage) -> str:
    """What memsvc reads of a message without text: its tool calls, as `name({"arg": ...})`."""
    return "\n".join(f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
                     for call in getattr(message, "tool_calls", None) or [])


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message stored in `message`; a message without a payload (from another client)
    becomes the message of its role."""
    if message.payload_json:
        stored = unpack(message.content, message.payload_json)
        if isinstance(stored, dict) and {"type", "data"} <= stored.keys():
            return messages_from_dict([stored])[0]
    if message.role == "tool":
        return ToolMessage(content=message.content, tool_call_id="")
    return READ_BACK.get(message.role, HumanMessage)(content=message.content)
