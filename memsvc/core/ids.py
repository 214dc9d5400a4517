"""Session ids: what a valid one is, and the prefix that marks a temporary session.

An id is what a user or a framework wrote (`user:42`, `conv/1`, an email, a
UUID): any non-empty UTF-8 text of at most MAX_SESSION_ID_BYTES bytes, except
control and format characters (Unicode Cc and Cf: no NUL, no newline, no
bidi override or zero-width trick) and the names `.` and `..`. Ids are
compared as bytes: no case folding, no Unicode normalization. Which
directory an id is stored in is layout.py's business, never the id's. Must
never touch the disk.
"""

from __future__ import annotations

import unicodedata

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason

MAX_SESSION_ID_BYTES = 256
TEMP_PREFIX = "temp-"
"Sessions named temp-* are scratch: never summarized, removed after 30 idle minutes."
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf"})
_REFUSED_NAMES = frozenset({".", ".."})
RULE = (f"a session id is 1-{MAX_SESSION_ID_BYTES} bytes of UTF-8 text without control or format characters "
        "(Unicode Cc, Cf), and not '.' or '..'")


def is_session_id(text: str) -> bool:
    return _problem(text) is None


def check_session_id(session_id: str, field: str = "session_id") -> str:
    """`session_id` itself, or INVALID_ARGUMENT `INVALID_SESSION_ID` saying what is wrong and what is allowed."""
    problem = _problem(session_id)
    if problem is not None:
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "..."
        raise InvalidArgument(f"{field} {shown!r} is invalid: {problem}; {RULE}", reason=Reason.INVALID_SESSION_ID)
    return session_id


def _problem(text: str) -> str | None:
    if not text:
        return "it is empty"
    if text in _REFUSED_NAMES:
        return "it names a directory"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8 (a lone surrogate)"
    if size > MAX_SESSION_ID_BYTES:
        return f"it is {size} bytes long"
    if text.isascii() and text.isprintable():  # most ids: U+0020 to U+007E hold no Cc or Cf character
        return None
    for at, char in enumerate(text):
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return f"character {at} is U+{ord(char):04X}, a control or format character"
    return None
