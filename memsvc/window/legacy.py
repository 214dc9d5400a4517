"""Legacy content headers of the reference agent's messages.

Older agent data carries the send time (and sender) inside the content, as
header lines `當前時間: YYYY-MM-DD HH:MM:SS` and `傳送者: NAME`, or a first
line `sendAt: YYYY-MM-DD HH:MM:SS, sender: NAME`. Owns recognising them,
reading the time in the local zone and stripping them. Must never touch
content that does not start with such a header.
"""

from __future__ import annotations

import re
from datetime import datetime

import msgspec

from memsvc.core.units import NANOS_PER_SECOND

_TIME_LINE = re.compile(r"^(?:當前時間|当前时间)\s*[:：]\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_SENDER_LINE = re.compile(r"^(?:傳送者|传送者|發送者|发送者)\s*[:：]\s*(.*?)\s*$")
_SEND_AT_LINE = re.compile(
    r"^sendAt:\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})\s*(?:,\s*sender:\s*(.*?))?\s*$")
_HEADER_LINES = 3


class Header(msgspec.Struct):
    send_at: int
    "UTC Unix nanoseconds."
    sender: str
    content: str
    "The content with the header lines removed."


def local_to_unix_nano(text: str) -> int:
    """`YYYY-MM-DD HH:MM:SS` in the local time zone, as UTC Unix nanoseconds."""
    moment = datetime.strptime(text.replace("T", " "), "%Y-%m-%d %H:%M:%S").astimezone()
    return int(moment.timestamp()) * NANOS_PER_SECOND


def parse(content: str) -> Header | None:
    """The header at the top of `content`, or None when there is none (or its
    date is impossible, in which case the content is left as it is)."""
    try:
        return _parse(content)
    except ValueError:
        return None


def _parse(content: str) -> Header | None:
    lines = content.split("\n")
    first = _SEND_AT_LINE.match(lines[0].rstrip("\r"))
    if first:
        return Header(local_to_unix_nano(first.group(1)), first.group(2) or "",
                      "\n".join(lines[1:]).lstrip("\n"))
    send_at, sender, consumed = 0, "", 0
    for line in lines[:_HEADER_LINES]:
        line = line.rstrip("\r")
        if (match := _TIME_LINE.match(line)) and not send_at:
            send_at = local_to_unix_nano(match.group(1))
        elif (match := _SENDER_LINE.match(line)) and not sender:
            sender = match.group(1)
        else:
            break
        consumed += 1
    if not send_at:
        return None
    return Header(send_at, sender, "\n".join(lines[consumed:]).lstrip("\n"))


def resolve(content: str, sender: str, send_at: int) -> tuple[str, str, int]:
    """(content, sender, send_at) of a message, the header applied when send_at is 0."""
    if send_at or (header := parse(content)) is None:
        return content, sender, send_at
    return header.content, sender or header.sender, header.send_at
