"""Reading a session back through ListMessages, page by page, and popping its newest message, for
the framework adapters.

Owns the paging (every stored message oldest first, or the newest `count`) and the pop (the newest
message deleted by its id, never by "the last one", so that neither a retry nor a pop running at
the same time deletes a second message), with the sync or the asyncio client. Must never convert
messages: each adapter turns them into its framework's own.
"""

from __future__ import annotations

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.errors import NotFoundError, UnavailableError
from memsvc_client.results import Message

PAGE_SIZE = 1000
"""The largest page the server gives: the fewest round trips."""


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
