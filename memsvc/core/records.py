"""The message record every tier stores: one message of a session.

Owns its fields and their names on disk (history.json's `sendAt`,
`idempotencyKey`, `payload`) and the roles a message may have. Must never
know where a record is kept.
"""

from __future__ import annotations

import re

import msgspec

MAX_ID = 2**63 - 1
"""The highest message id: ids fit a signed 64-bit integer wherever they are kept (the archive, the vectors,
page tokens, every client's integers)."""
ROLES = ("user", "assistant", "system", "tool")
"system: instructions to the model; tool: a tool call's result (the call itself is the assistant's)."

_INVISIBLE = (
    r"\s\x00-\x1f\x7f-\x9f"  # whitespace and controls (Cc)
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"  # format characters (Cf)
    "\u034f\ufe00-\ufe0f\U000e0100-\U000e01ef"  # the grapheme joiner and variation selectors
)
_VISIBLE = re.compile(f"[^{_INVISIBLE}]")


def utf8_size(text: str) -> int:
    """Bytes `text` takes in UTF-8 (a lone surrogate as its three bytes, so any str has a size)."""
    # An ASCII string's length is its size, without encoding a copy (isascii reads a flag CPython keeps).
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def has_visible_text(text: str) -> bool:
    """False for text made only of whitespace, control and format characters (NUL, zero-width
    spaces and joiners, direction marks...): what a reader would see as nothing.

    The regex stops at the first visible character, so ordinary text costs one step."""
    return _VISIBLE.search(text) is not None


class Record(msgspec.Struct, omit_defaults=True, gc=False,
             rename={"send_at": "sendAt", "idempotency_key": "idempotencyKey"}):
    """One message as stored in history.json."""

    id: int = 0
    role: str = ""
    content: str = ""
    send_at: int = 0
    "UTC Unix nanoseconds."
    sender: str = ""
    idempotency_key: str = ""
    "Set on every record of an Append that carried a key, so a retry finds its first result."
    payload: str = ""
    "Opaque JSON text kept beside the content, as the client sent it; never searched."
