"""Adopting the reference agent's data directory (`memsvc import DIR`).

Owns reading `DIR/sessions/*/history.json` in the reference layout (the
directory's name is the session id; message ids as strings or missing,
times in legacy content headers), writing each session into memsvc's data
root where the layout puts its id, with its summary and cursor, and
indexing every message into the archive. Must never modify the source
directory, and never overwrite a session that already exists in the data
root.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from memsvc.core import durable, layout
from memsvc.core.ids import is_session_id
from memsvc.core.layout import TenantLayout
from memsvc.core.records import Record
from memsvc.window import history, legacy
from memsvc.window.derived import ArchiveOfRecord, DerivedStore

log = logging.getLogger(__name__)

CARRIED_FILES = (layout.SUMMARY, layout.CURSOR)


class Report(msgspec.Struct):
    imported: list[str] = []
    skipped: dict[str, str] = {}
    "Session id (or directory name) -> why it was not imported."
    messages: int = 0
    damaged: list[str] = []
    "Sessions whose source history had unreadable lines (dropped; the source is untouched)."


def source_sessions(source: Path) -> list[Path]:
    """Session directories under `source/sessions` (or `source` itself when it is the sessions directory)."""
    root = source / "sessions" if (source / "sessions").is_dir() else source
    return sorted(path for path in root.iterdir() if path.is_dir() and (path / layout.HISTORY).is_file())


def adopt(records: Iterable[Record], fallback_send_at: int) -> list[Record]:
    """Take send times and senders from legacy headers; records with none get `fallback_send_at`."""
    adopted = []
    for record in records:
        content, sender, send_at = legacy.resolve(record.content, record.sender, record.send_at)
        adopted.append(msgspec.structs.replace(record, content=content, sender=sender,
                                               send_at=send_at or fallback_send_at))
    return adopted


def adopt_directory(source: Path, places: TenantLayout, archive: ArchiveOfRecord,
                    progress: Callable[[list[Path]], Iterable[Path]] | None = None) -> Report:
    """Import every session of `source` into `places`, every message into `archive`.

    `progress` wraps the list of session directories (a progress bar).
    """
    report = Report()
    directories = source_sessions(source)
    for directory in progress(directories) if progress else directories:
        reason = _adopt_session(directory, places, archive, report)
        if reason:
            report.skipped[directory.name] = reason
    archive.flush()
    return report


def _adopt_session(directory: Path, places: TenantLayout, archive: DerivedStore, report: Report) -> str:
    session_id = directory.name
    if not is_session_id(session_id):
        return "not a valid session id"
    target = places.session_dir(session_id)
    if target.exists():
        return "already in the data directory"
    source_history = directory / layout.HISTORY
    decoded = history.decode(source_history.read_bytes())
    if not decoded.complete:
        report.damaged.append(session_id)
    records = adopt(decoded.records, source_history.stat().st_mtime_ns)
    durable.ensure_dir(target)
    if layout.is_hashed(target.name):
        layout.record_id(target / layout.ID_FILE, session_id)
    for name in CARRIED_FILES:
        if (directory / name).is_file():
            durable.atomic_write(target / name, (directory / name).read_bytes())
    history.rewrite(target / layout.HISTORY, records)
    archive.appended(session_id, records)
    report.imported.append(session_id)
    report.messages += len(records)
    log.info("imported session", extra={"session": session_id, "messages": len(records)})
    return ""
