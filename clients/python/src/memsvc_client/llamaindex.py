"""LlamaIndex's chat store (llama-index-core's `BaseChatStore`) kept in memsvc: one key, one session.

Owns how a LlamaIndex `ChatMessage` is stored: its role (user; assistant, chatbot and model as
assistant; system and developer as system; tool and function as tool), its text blocks as
memsvc's content (what search, the window and the summary read), and the message as
`model_dump(mode="json")` writes it, less that text, in payload_json (`payloads`), from which it
is read back equal: blocks (images, documents, tool calls), additional_kwargs. Messages stored
without a payload (by another client) come back as messages of their role. Needs the
`llamaindex` extra: `pip install 'memsvc-client[llamaindex]'`. Must never reach memsvc but
through the clients.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

try:
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.llms import ChatMessage
    from llama_index.core.storage.chat_store.base import BaseChatStore
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("memsvc_client.llamaindex needs llama-index-core: pip install 'memsvc-client[llamaindex]'") \
        from missing

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.errors import NotFoundError
from memsvc_client.payloads import Piece, pack, unpack
from memsvc_client.results import Message
from memsvc_client.transcript import (
    PAGE_SIZE,
    every_message,
    every_message_async,
    insert,
    insert_async,
    pop_newest,
    pop_newest_async,
)

__all__ = ["MemsvcChatStore"]

ROLES = {"user": "user", "assistant": "assistant", "chatbot": "assistant", "model": "assistant",
         "system": "system", "developer": "system", "tool": "tool", "function": "tool"}
"""LlamaIndex's MessageRole values to memsvc roles."""


class MemsvcChatStore(BaseChatStore):
    """Chat histories kept in memsvc, a session per key (`chat_store_key`), for `ChatMemoryBuffer`
    and any LlamaIndex code that takes a `BaseChatStore`.

    `client` is a `Client` or an `AsyncClient`, which the caller owns and closes: the blocking
    methods run on a `Client`, the asyncio twins (`aget_messages`, `async_add_message`, ...) on an
    `AsyncClient` on the caller's event loop, each the one given or its twin (`Connection.twin`),
    never on a thread of their own. `get_keys` lists every session on the server.
    `set_messages` and `add_message` with an `idx` rewrite the history in one step (ReplaceMessages):
    a crash leaves it as it was or as written, never half; the messages get new ids and the session's
    rolling summary is deleted.
    """

    _client: Client | AsyncClient = PrivateAttr()

    def __init__(self, client: Client | AsyncClient, **data: Any):
        super().__init__(**data)
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "MemsvcChatStore"

    # -- blocking --------------------------------------------------------------

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """The session `key` holds exactly `messages` from now on, in one step (retried under one
        idempotency key)."""
        self._blocking.replace_messages(key, [to_memsvc(message) for message in messages],
                                        idempotency_key=uuid.uuid4().hex)

    def get_messages(self, key: str) -> list[ChatMessage]:
        """Every message of the session `key`, oldest first ([] when it has none)."""
        try:
            return [to_llamaindex(message) for message in every_message(self._blocking, key)]
        except NotFoundError:
            return []

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Append the message, durable when this returns (retried under one idempotency key: never
        stored twice); with an `idx`, insert it there (as `list.insert`) in one step."""
        if idx is not None:
            insert(self._blocking, key, idx, to_memsvc(message))
            return
        self._blocking.append(key, [to_memsvc(message)], idempotency_key=uuid.uuid4().hex)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Remove the session from every store; its messages as they were, None when there was none."""
        try:
            messages = self.get_messages(key)
            self._blocking.remove_session(key)
        except NotFoundError:
            return None
        return messages

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete the message at `idx` (a negative one counts from the end) by its id; None when
        there is none there (or another caller deleted it first)."""
        try:
            stored = every_message(self._blocking, key)
        except NotFoundError:
            return None
        if not -len(stored) <= idx < len(stored):
            return None
        deleted = self._blocking.delete_messages(key, [stored[idx].id]).messages
        return to_llamaindex(deleted[0]) if deleted else None

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Delete the newest message by its id and return it; None when the session has none."""
        popped = pop_newest(self._blocking, key)
        return None if popped is None else to_llamaindex(popped)

    def get_keys(self) -> list[str]:
        keys: list[str] = []
        token = ""
        while True:
            page = self._blocking.list_sessions(page_size=PAGE_SIZE, page_token=token)
            keys += [session.session_id for session in page.sessions]
            if not (token := page.next_page_token):
                return keys

    # -- asyncio ---------------------------------------------------------------

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await self._asyncio.replace_messages(key, [to_memsvc(message) for message in messages],
                                             idempotency_key=uuid.uuid4().hex)

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        try:
            return [to_llamaindex(message) for message in await every_message_async(self._asyncio, key)]
        except NotFoundError:
            return []

    async def async_add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        if idx is not None:
            await insert_async(self._asyncio, key, idx, to_memsvc(message))
            return
        await self._asyncio.append(key, [to_memsvc(message)], idempotency_key=uuid.uuid4().hex)

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        try:
            messages = await self.aget_messages(key)
            await self._asyncio.remove_session(key)
        except NotFoundError:
            return None
        return messages

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        try:
            stored = await every_message_async(self._asyncio, key)
        except NotFoundError:
            return None
        if not -len(stored) <= idx < len(stored):
            return None
        deleted = (await self._asyncio.delete_messages(key, [stored[idx].id])).messages
        return to_llamaindex(deleted[0]) if deleted else None

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        popped = await pop_newest_async(self._asyncio, key)
        return None if popped is None else to_llamaindex(popped)

    async def aget_keys(self) -> list[str]:
        keys: list[str] = []
        token = ""
        while True:
            page = await self._asyncio.list_sessions(page_size=PAGE_SIZE, page_token=token)
            keys += [session.session_id for session in page.sessions]
            if not (token := page.next_page_token):
                return keys

    @property
    def _blocking(self) -> Client:
        return self._client.twin(Client)

    @property
    def _asyncio(self) -> AsyncClient:
        return self._client.twin(AsyncClient)


def to_memsvc(message: ChatMessage) -> dict[str, Any]:
    """The memsvc message of a LlamaIndex message: role, its text blocks as content, the rest as payload."""
    dumped = message.model_dump(mode="json")
    content, payload = pack(dumped, text_of(dumped), f"[{message.role.value} message]")
    return {"role": ROLES[message.role.value], "content": content, "send_at_unix_nano": time.time_ns(),
            "payload_json": payload}


def text_of(dumped: dict[str, Any]) -> list[Piece]:
    """The text blocks, a line each (as `ChatMessage.content` joins them), each with its place."""
    pieces: list[Piece] = []
    for index, block in enumerate(dumped.get("blocks", [])):
        if block.get("block_type") == "text" and isinstance(block.get("text"), str):
            if pieces:
                pieces.append(("\n", None))
            pieces.append((block["text"], ("blocks", index, "text")))
    return pieces


def to_llamaindex(message: Message) -> ChatMessage:
    """The message stored in `message`; one without a payload becomes a message of its role."""
    if message.payload_json:
        stored = unpack(message.content, message.payload_json)
        if isinstance(stored, dict) and "role" in stored:
            return ChatMessage.model_validate(stored)
    return ChatMessage(role=message.role or "user", content=message.content)
