"""history.json: the on-disk layout of a session's recent messages.

The file is a JSON array laid out one append per line, so an append rewrites
only the closing bracket and a crash can only tear the last line:

    [
    {"id":1,...}
    ,{"id":2,...},{"id":3,...}
    ]

Owns reading (with repair of a torn tail, and of ids out of order or
repeated: ids are never renumbered, since the archive and the summary cursor
know messages by id), appending in place and whole rewrites. Must never decide
what to store: that is appending.py.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import msgspec

from memsvc.core import durable, failpoints
from memsvc.core.records import Record

log = logging.getLogger(__name__)

OPENING = b"[\n"
CLOSING = b"]\n"
EMPTY = OPENING + CLOSING


class _LegacyRecord(msgspec.Struct):
    """The reference agent's records: ids may be strings or missing."""

    id: int | str | None = None
    role: str = ""
    content: str = ""
    sendAt: int = 0
    sender: str = ""


_encoder = msgspec.json.Encoder()
_records = msgspec.json.Decoder(list[Record])
_legacy_records = msgspec.json.Decoder(list[_LegacyRecord])


def encode_line(records: list[Record], first: bool) -> bytes:
    """One append as one line: the records without their array brackets."""
    body = _encoder.encode(records)[1:-1]
    return (b"" if first else b",") + body + b"\n"


def render(records: list[Record]) -> bytes:
    """The whole file for `records`, one record per line."""
    if not records:
        return EMPTY
    lines = [encode_line([record], first=index == 0) for index, record in enumerate(records)]
    return OPENING + b"".join(lines) + CLOSING


class LoadedHistory(msgspec.Struct):
    records: list[Record]
    size: int
    repaired: bool = False


class Decoded(msgspec.Struct):
    records: list[Record]
    canonical: bool
    "Already in the one-append-per-line layout with increasing ids: nothing to rewrite."
    complete: bool
    "Every byte was understood; False when damaged lines were dropped."
    reordered: bool = False
    "Ids were out of order or repeated: sorted, and a repeated id given to another message got a new one."


def decode(data: bytes) -> Decoded:
    """The records of a history file in any layout memsvc or the reference agent wrote."""
    if _is_canonical(data):
        try:
            records = _records.decode(data)
        except msgspec.DecodeError:
            pass  # a damaged line, or legacy field types: handled below
        else:
            if _ids_increasing(records):
                return Decoded(records, canonical=True, complete=True)
    lenient = _decode_lenient(data)
    if lenient is None:
        salvaged, reordered = _in_id_order(_salvage_lines(data))
        return Decoded(salvaged, canonical=False, complete=False, reordered=reordered)
    records, reordered = lenient
    return Decoded(records, canonical=False, complete=True, reordered=reordered)


def load(path: Path) -> LoadedHistory:
    """Read a history file, repairing it in place if a crash tore its tail or its ids are out of order.

    A damaged original is kept beside it (`history.json.damaged-<ns>`) before
    any repair, so nothing is ever dropped silently.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LoadedHistory([], 0)
    decoded = decode(data)
    if decoded.canonical:
        return LoadedHistory(decoded.records, len(data))
    if not decoded.complete or decoded.reordered:
        kept = path.with_name(f"{path.name}.damaged-{time.time_ns()}")
        durable.atomic_write(kept, data)
        log.warning("repaired damaged history", extra={
            "path": str(path), "kept_copy": kept.name, "records_kept": len(decoded.records),
            "lines_dropped": not decoded.complete, "ids_out_of_order": decoded.reordered})
    size = rewrite(path, decoded.records)
    return LoadedHistory(decoded.records, size, repaired=True)


def _is_canonical(data: bytes) -> bool:
    if not (data.startswith(OPENING) and data.endswith(b"\n" + CLOSING)):
        return False
    return all(line[:1] == b"{" or line[:2] == b",{" for line in data.split(b"\n")[1:-2])


def _ids_increasing(records: list[Record]) -> bool:
    previous = 0
    for record in records:
        if record.id <= previous:
            return False
        previous = record.id
    return True


def _decode_lenient(data: bytes) -> tuple[list[Record], bool] | None:
    """Decode a whole, valid array in any layout, and whether its ids had to be put in order;
    None if it is not valid JSON."""
    try:
        records = _records.decode(data)
    except msgspec.ValidationError:
        try:
            return _renumber(_legacy_records.decode(data)), False
        except msgspec.DecodeError:
            return None
    except msgspec.DecodeError:
        return None
    return _in_id_order(records)


def _in_id_order(records: list[Record]) -> tuple[list[Record], bool]:
    """`records` by increasing id, and whether they needed it.

    Never renumbers: archived copies and the summary cursor name messages by
    id, so a message keeps its id. An exact repeat of a record is dropped; a
    different message holding an id already taken (or none) gets a new id
    above every other, so no id ever names two messages.
    """
    if _ids_increasing(records):
        return records, False
    ordered: list[Record] = []
    clashing: list[Record] = []
    for record in sorted(records, key=lambda record: record.id):
        if ordered and record.id == ordered[-1].id:
            if record != ordered[-1]:
                clashing.append(record)
        elif record.id <= 0:
            clashing.append(record)
        else:
            ordered.append(record)
    highest = ordered[-1].id if ordered else 0
    ordered += [msgspec.structs.replace(record, id=highest + offset) for offset, record in enumerate(clashing, 1)]
    return ordered, True


def _renumber(legacy: list[_LegacyRecord]) -> list[Record]:
    return [Record(id=index, role=item.role, content=item.content, send_at=item.sendAt, sender=item.sender)
            for index, item in enumerate(legacy, start=1)]


def _salvage_lines(data: bytes) -> list[Record]:
    """Every complete line of a torn or damaged file, in order.

    A line counts only if its newline was written: a torn append is dropped
    whole, never kept as a partial batch.
    """
    kept: list[Record] = []
    for line in data.split(b"\n")[1:-1]:
        body = line[1:] if line.startswith(b",") else line
        if not body.startswith(b"{"):
            continue
        try:
            kept.extend(_records.decode(b"[" + body + b"]"))
        except msgspec.DecodeError:
            continue
    return kept


def planned(size: int, records: list[Record]) -> tuple[int, bytes]:
    """Where an append of `records` to a file of `size` bytes writes, and what: one line and the
    closing bracket, over the old closing bracket, so its cost does not grow with the file and a
    torn write can damage nothing but this line."""
    if size == 0:
        return 0, OPENING + encode_line(records, first=True) + CLOSING
    return size - len(CLOSING), encode_line(records, first=size == len(EMPTY)) + CLOSING


def append(path: Path, size: int, records: list[Record]) -> int:
    """Append `records` as one line, durably; returns the new file size."""
    offset, payload = planned(size, records)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        durable.write_at(fd, offset, payload)
    except OSError:
        _undo_append(fd, size)
        raise
    finally:
        os.close(fd)
    if size == 0:
        durable.fsync_dir(path.parent)
    return offset + len(payload)


def write_planned(path: Path, size: int, offset: int, payload: bytes) -> int:
    """An append `planned` for a file of `size` bytes, without its sync: only for bytes a redo
    log (journal.py) makes durable. Returns the new file size."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        # `drop`: the write vanishes as an unsynced one does when the machine loses power.
        if not failpoints.dropped("history.write"):
            durable.write_unsynced(fd, offset, payload)
    except OSError:
        _undo_append(fd, size)
        raise
    finally:
        os.close(fd)
    return offset + len(payload)


def undo(path: Path, size: int) -> None:
    """Put the file back as it was at `size` bytes: an append whose redo record could not be written."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        _undo_append(fd, size)
    finally:
        os.close(fd)


def _undo_append(fd: int, size: int) -> None:
    """Put back the file as it was before a failed append, so the refused
    messages cannot reappear when the file is next read."""
    try:
        if size:
            os.pwrite(fd, CLOSING, size - len(CLOSING))
        durable.truncate(fd, size)
    except OSError:
        pass  # the disk refuses even this: the next open repairs the tail


def rewrite(path: Path, records: list[Record]) -> int:
    """Replace the whole file atomically; returns its new size."""
    data = render(records)
    durable.atomic_write(path, data)
    return len(data)
