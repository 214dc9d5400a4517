"""Reading a session back through ListMessages, page by page, popping its newest message and inserting
one inside it, for the framework adapters.

Owns the paging (every stored message oldest first, or the newest `count`), the pop (the newest
message deleted by its id, never by "the last one", so that neither a retry nor a pop running at
the same time deletes a second message) and the insertion (the history read, the message put at its
place, and the whole written back by one ReplaceMessages that expects the newest message read, so a
concurrent writer is never overwritten: the insertion is then made again on what it wrote), with
the sync or the asyncio client. Must never convert messages: each adapter turns them into its
framework's own.
"""


from __future__ import annotations

import uuid
from typing import Any

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.errors import FailedPreconditionError, NotFoundError, UnavailableError
from memsvc_client.results import Message

PAGE_SIZE = 1000
"""The largest page the server gives: the fewest round trips."""
HISTORY_CHANGED = "HISTORY_CHANGED"
"""The reason ReplaceMessages gives when another writer changed the history since it was read."""


def every_message(client: Client, session_id: str) -> list[Message]:
    """Every message the session stores (archive and history.json), oldest first."""
    messages: list[Message] = []
    token = ""
    while True:
        page = client.list_messages(session_id, page_size=PAGE_SIZE, page_token=token)
        messages += page.messages
        if not (token := page.next_page_token):
            return messages


async def every_message_async(client: AsyncClient, session_id: str) -> list[Message]:
    messages: list[Message] = []
    token = ""
    while True:
        page = await client.list_messages(session_id, page_size=PAGE_SIZE, page_token=token)
        messages += page.messages
        if not (token := page.next_page_token):
            return messages


async def newest_async(client: AsyncClient, session_id: str, count: int) -> list[Message]:
    """The newest `count` messages, oldest first."""
    pages: list[list[Message]] = []
    token, left = "", count
    while left > 0:
        page = await client.list_messages(session_id, page_size=min(left, PAGE_SIZE), page_token=token,
                                          newest_first=True)
        pages.append(page.messages)
        left -= len(page.messages)
        if not (token := page.next_page_token):
            break
    return [message for page in reversed(pages) for message in page]


def pop_newest(client: Client, session_id: str) -> Message | None:
    """Delete the session's newest message from every store and return it; None when there is none."""
    while True:
        try:
            newest = client.list_messages(session_id, page_size=1, newest_first=True).messages
        except NotFoundError:
            return None
        if not newest:
            return None
        try:
            deleted = client.delete_messages(session_id, [newest[0].id], retry=False)
        except UnavailableError:
            # The attempt may have deleted it and lost the reply: deleting the same id again
            # deletes nothing more, and finding it gone, takes the attempt's word that it popped it
            # (a pop at the same moment cannot be told apart).
            deleted = client.delete_messages(session_id, [newest[0].id])
            if not deleted.messages:
                return newest[0]
        if deleted.messages:
            return deleted.messages[0]
        # Another pop deleted it first: pop the next newest.


async def pop_newest_async(client: AsyncClient, session_id: str) -> Message | None:
    """`pop_newest`, awaited."""
    while True:
        try:
            newest = (await client.list_messages(session_id, page_size=1, newest_first=True)).messages
        except NotFoundError:
            return None
        if not newest:
            return None
        try:
            deleted = await client.delete_messages(session_id, [newest[0].id], retry=False)
        except UnavailableError:
            deleted = await client.delete_messages(session_id, [newest[0].id])
            if not deleted.messages:
                return newest[0]
        if deleted.messages:
            return deleted.messages[0]


def insert(client: Client, session_id: str, index: int, message: dict[str, Any]) -> None:
    """Put `message` at `index` of the session's history (as `list.insert` does), in one step."""
    key = uuid.uuid4().hex  # a retry after a lost reply replays the first result
    while True:
        stored = every_message(client, session_id)
        try:
            client.replace_messages(session_id, _inserted(stored, index, message), idempotency_key=key,
                                    expected_last_id=stored[-1].id if stored else 0)
            return
        except FailedPreconditionError as error:
            if error.reason != HISTORY_CHANGED:
                raise


async def insert_async(client: AsyncClient, session_id: str, index: int, message: dict[str, Any]) -> None:
    """`insert`, awaited."""
    key = uuid.uuid4().hex
    while True:
        stored = await every_message_async(client, session_id)
        try:
            await client.replace_messages(session_id, _inserted(stored, index, message), idempotency_key=key,
                                          expected_last_id=stored[-1].id if stored else 0)
            return
        except FailedPreconditionError as error:
            if error.reason != HISTORY_CHANGED:
                raise


def _inserted(stored: list[Message], index: int, message: dict[str, Any]) -> list[Message | dict[str, Any]]:
    history: list[Message | dict[str, Any]] = list(stored)
    history.insert(index, message)
    return history
