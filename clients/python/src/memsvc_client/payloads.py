"""How a framework adapter stores one of its framework's messages as one memsvc message: the
message's text once, as `content`, and the rest of it in `payload_json`, strict JSON, from which
the message is read back exactly.

Owns the envelope in `payload_json`:

    {"memsvc": 1, "text": [[start, end, path], ...], "item": ITEM}

ITEM is the framework's message as JSON (what `json.dumps` makes of it) with every string that
`content` carries replaced by null; each `text` entry says which: `content[start:end]` (in code
points) goes back at `path` (keys and list indices). What strict JSON cannot hold (NaN and
Infinity, which `json.dumps` writes and `json.loads` reads, and lone surrogates, which UTF-8
cannot encode) moves the item into a string instead, `"item_json": "<that JSON text>"`, with
lone surrogates written as `\\udXXX` escapes. Sizes are UTF-8 bytes: nothing is written as ASCII
escapes but lone surrogates.

`content` must show something: text made only of whitespace, control or format characters
("\\u200b", "\\x00", "\\ufeff") is stored whole in the item, and `content` is the adapter's stand-in
("[message]"); text holding lone surrogates goes to `content` with U+FFFD in their place and is
kept whole in the item. A payload without the envelope (written before it existed) is the
message itself. Must never decide what a message's text or role is: each adapter does.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

Path = tuple[str | int, ...]
"""Where a string sits in a message: dict keys and list indices, outermost first."""

Piece = tuple[str, Path | None]
"""A piece of `content`: text and the path it comes from in the message, or None for text of the
adapter's own (a separator, a call's parentheses) that is not put back."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def pack(message: object, pieces: Iterable[Piece], stand_in: str) -> tuple[str, str]:
    """(content, payload_json) for `message`, any value `json.dumps` takes: `content` is the
    pieces joined, or `stand_in` when they show nothing."""
    item = json.loads(json.dumps(message, ensure_ascii=False))  # the message as SQLite-style stores read it back
    parts: list[str] = []
    spans: list[tuple[int, int, Path]] = []
    at = 0
    for text, path in pieces:
        if path is not None and not _SURROGATE.search(text):
            spans.append((at, at + len(text), path))
        else:
            text = _SURROGATE.sub("\ufffd", text)
        parts.append(text)
        at += len(text)
    content = "".join(parts)
    if not visible(content):
        content, spans = _SURROGATE.sub("\ufffd", stand_in), []
    for _, _, path in spans:
        _put(item, path, None)
    return content, _envelope(item, [[start, end, list(path)] for start, end, path in spans])


def unpack(content: str, payload_json: str) -> Any:
    """The message `pack` stored (or a payload without the envelope, as it is)."""
    stored = json.loads(payload_json)
    if not (isinstance(stored, dict) and stored.get("memsvc") == 1):
        return stored
    item = stored["item"] if "item" in stored else json.loads(stored["item_json"])
    for start, end, path in stored["text"]:
        _put(item, path, content[start:end])
    return item


def visible(text: str) -> bool:
    """Whether the server takes `text` as content: it holds a letter, digit, punctuation mark or
    symbol (the server refuses text of only whitespace, control and format characters; marks,
    private-use and unassigned characters alone count as nothing here, which only keeps such text
    in the payload)."""
    return any(unicodedata.category(char)[0] in "LNPS" for char in text)


def _envelope(item: Any, text: list[list[Any]]) -> str:
    head = '{"memsvc":1,"text":' + json.dumps(text, ensure_ascii=False, separators=(",", ":"))
    try:
        strict = json.dumps(item, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # NaN or Infinity
        strict = None
    if strict is not None and not _SURROGATE.search(strict):
        return f'{head},"item":{strict}}}'
    lenient = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    escaped = _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", lenient)
    return f'{head},"item_json":{json.dumps(escaped, ensure_ascii=False)}}}'


def _put(item: Any, path: Iterable[str | int], value: Any) -> None:
    *outer, last = path
    for step in outer:
        item = item[step]
    item[last] = value
