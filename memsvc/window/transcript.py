"""A session's whole conversation, read across the compaction cut.

Owns reading every message after a given id: from the archive below the
first message of history.json, then from history.json, so a reader that
fell behind the cut (the summarizer) misses nothing. Must never write.
"""

from __future__ import annotations

from memsvc.core.records import Record
from memsvc.window.derived import ArchiveOfRecord
from memsvc.window.sessions import Sessions


class Transcript:
    def __init__(self, sessions: Sessions, archive: ArchiveOfRecord):
        self.sessions = sessions
        self.archive = archive

    def messages_after(self, session_id: str, after_id: int) -> list[Record]:
        """Every message with id > after_id, oldest first."""
        recent = self.sessions.records_after(session_id, after_id)
        session = self.sessions.reading(session_id)
        if session is None:
            return recent
        cut = recent[0].id if recent else session.next_id
        return self.archive.messages(session_id, after_id, cut) + recent
