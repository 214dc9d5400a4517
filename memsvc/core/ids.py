"""Session ids: what a valid one is, and the prefix that marks a temporary session.

A session id names a directory under the data root, so it must never escape
it. Must never touch the disk.
"""

from __future__ import annotations

import re

from memsvc.core.errors import InvalidArgument

SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
TEMP_PREFIX = "temp-"
"Sessions named temp-* are scratch: never summarized, removed after 30 idle minutes."


def is_session_id(text: str) -> bool:
    return SESSION_ID.fullmatch(text) is not None


def check_session_id(session_id: str) -> str:
    """`session_id` itself, or INVALID_ARGUMENT `INVALID_SESSION_ID`."""
    if not is_session_id(session_id):
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "..."
        raise InvalidArgument(
            f"session_id {shown!r} is invalid: use 1-128 characters of A-Z a-z 0-9 . _ -, "
            "not starting with '.' or '-'", reason="INVALID_SESSION_ID")
    return session_id
