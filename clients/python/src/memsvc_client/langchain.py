"""LangChain's chat message history (langchain-core's `BaseChatMessageHistory`) kept in memsvc.

Owns how a LangChain message is stored: its role (human -> user, ai -> assistant, system, tool and
function -> tool), its text as memsvc's content (what search, the window and the summary read; a
tool call's name and arguments when the message has no text), and the whole message as
`message_to_dict` writes it in payload_json, from which it is read back exactly: tool calls, ids,
additional_kwargs, response_metadata, multimodal content. Messages stored without a payload (by
another client) come back as the message of their role. Needs the `langchain` extra:
`pip install 'memsvc-client[langchain]'`. Must never reach memsvc but through the clients.
"""

from __future__ import annotations

import json
import time
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

    `client` serves the blocking methods (`messages`, `add_messages`, `clear`), `async_client` the
    asyncio ones (`aget_messages`, `aadd_messages`, `aclear`); without it they run the blocking ones
    in an executor. `clear` is a Reset of the session: `reset_mode` "all" (the default) also deletes
    the rolling summary, "summary" keeps it. The caller owns the clients (and closes them).
    """

    def __init__(self, session_id: str, client: Client | None = None, *, async_client: AsyncClient | None = None,
                 reset_mode: str = "all"):
        if client is None and async_client is None:
            raise TypeError("MemsvcChatMessageHistory needs a memsvc Client, an AsyncClient or both")
        super().__init__()
        self.session_id = session_id
        self.client = client
        self.async_client = async_client
        self.reset_mode = reset_mode

    def _blocking(self) -> Client:
        if self.client is None:
            raise RuntimeError("this history was given only an AsyncClient: use the async methods "
                               "(aget_messages, aadd_messages, aclear) or pass client= too")
        return self.client

    # -- blocking --------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first, as LangChain stored it."""
        return [to_langchain(message) for message in every_message(self._blocking(), self.session_id)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in one Append: durable when this returns."""
        if messages:
            self._blocking().append(self.session_id, [to_memsvc(message) for message in messages])

    def clear(self) -> None:
        try:
            self._blocking().reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass  # never written: nothing to clear

    # -- asyncio ---------------------------------------------------------------

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await super().aget_messages()
        return [to_langchain(message) for message in await every_message_async(self.async_client, self.session_id)]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            await super().aadd_messages(messages)
        elif messages:
            await self.async_client.append(self.session_id, [to_memsvc(message) for message in messages])

    async def aclear(self) -> None:
        if self.async_client is None:
            await super().aclear()
            return
        try:
            await self.async_client.reset(self.session_id, self.reset_mode)
        except NotFoundError:
            pass


def to_memsvc(message: BaseMessage) -> dict[str, Any]:
    """The memsvc message of a LangChain message: role, searchable text, and the whole message as payload."""
    kind = message.type.removesuffix("MessageChunk").lower()
    if kind == "remove":
        raise ValueError("a RemoveMessage is an instruction, not a message: it cannot be stored")
    role = CHAT_ROLES.get(str(getattr(message, "role", "")).lower(), "user") if kind == "chat" else ROLES.get(kind)
    if role is None:
        raise ValueError(f"memsvc cannot store LangChain messages of type {message.type!r}")
    return {"role": role, "content": text_of(message), "send_at_unix_nano": time.time_ns(),
            "payload_json": json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"))}


def text_of(message: BaseMessage) -> str:
    """What memsvc searches, embeds and summarizes: the text blocks, else the tool calls, else the type."""
    text = message.text
    if text.strip():
        return text
    calls = [f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
             for call in getattr(message, "tool_calls", None) or []]
    return "\n".join(calls) or f"[{message.type} message]"


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message stored in `message`'s payload; a message without one (from another client)
    becomes the message of its role."""
    if message.payload_json:
        stored = json.loads(message.payload_json)
        if isinstance(stored, dict) and {"type", "data"} <= stored.keys():
            return messages_from_dict([stored])[0]
    if message.role == "tool":
        return ToolMessage(content=message.content, tool_call_id="")
    return READ_BACK.get(message.role, HumanMessage)(content=message.content)
