"""`.summary_cursor`: which of a session's messages are already summarized.

The file keeps the reference's first line, the local time of the last
summarized message (`YYYY-MM-DD HH:MM:SS`), and adds that message's id and
exact send time, so no message is skipped for sharing a second with it:

    2025-03-01 14:02:07
    id 42
    send_at 1740837727123456789

Owns reading (a reference cursor holds only the time) and writing it. An
unreadable cursor (bad UTF-8, no time or id) is treated as an unreadable
summary.json is: left in place and logged, shown as no cursor, and the
summary is not generated over it (that could skip or repeat messages) until
a person fixes or deletes it. Must never decide what to summarize.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from pathlib import Path

import msgspec

from memsvc.core import durable
from memsvc.core.errors import FailedPrecondition
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.core.units import NANOS_PER_SECOND

log = logging.getLogger(__name__)

CURSOR_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


class Cursor(msgspec.Struct):
    last_id: int
    "Id of the last summarized message; 0 for a reference cursor that holds only a time."
    send_at: int
    "Its send time, UTC Unix nanoseconds."

    def covers(self, record: Record) -> bool:
        """True when `record` is summarized; a reference cursor covers its whole second."""
        if self.last_id:
            return record.id <= self.last_id
        return record.send_at < (self.send_at // NANOS_PER_SECOND + 1) * NANOS_PER_SECOND


class UnreadableCursor(FailedPrecondition):
    reason = Reason.SUMMARY_CURSOR_UNREADABLE


def read_cursor(path: Path) -> Cursor | None:
    """The cursor, None when there is none; UnreadableCursor (logged, the file left in place) when
    it cannot be read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        lines = data.decode("utf-8").splitlines()
        fields = dict(line.split(" ", 1) for line in lines[1:] if " " in line)
        if "id" in fields and "send_at" in fields:
            return Cursor(int(fields["id"]), int(fields["send_at"]))
        seconds = datetime.strptime(lines[0].strip(), CURSOR_TIME_FORMAT).timestamp()
    except (ValueError, IndexError) as exc:  # UnicodeDecodeError is a ValueError
        log.warning("unreadable .summary_cursor left in place", extra={"path": str(path), "error": str(exc)})
        raise UnreadableCursor(
            f"{path} cannot be read ({type(exc).__name__}); fix it (a 'YYYY-MM-DD HH:MM:SS' line) or delete it "
            "(the whole conversation is then summarized again) before summarizing this session") from None
    return Cursor(0, int(seconds) * NANOS_PER_SECOND)


def write_cursor(path: Path, record: Record) -> None:
    shown = time.strftime(CURSOR_TIME_FORMAT, time.localtime(record.send_at // NANOS_PER_SECOND))
    durable.atomic_write(path, f"{shown}\nid {record.id}\nsend_at {record.send_at}\n".encode())
