"""Reading a whole session back through ListMessages, page by page, for the framework adapters.

Owns the paging: every stored message oldest first, or the newest `count`, with the sync or the
asyncio client. Must never convert messages: each adapter turns them into its framework's own.
"""

from __future__ import annotations

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
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
