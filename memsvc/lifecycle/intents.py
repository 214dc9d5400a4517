"""Intent records: a Reset, RemoveSession, DeleteMessages or ReplaceMessages is written down before any store
changes.

Each of them touches several stores (the
archive, the vectors, history.json, the summary) that cannot change in one
atomic step. Its intent
is made durable first, as `sessions/.intent-<session directory name>`, and deleted
only once every store is done; a kill in between leaves the record, and the
operation is completed before the server serves again. So an interrupted
Reset is either not done at all (no record) or done in full, never a mix.

Owns the records' files and which sessions have an operation that was
started and not finished (`interrupted`): those refuse other calls until it
is completed. Must never touch a store: clearing.py does the work.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import msgspec

from memsvc.core import durable, layout
from memsvc.core.errors import Unavailable
from memsvc.core.ids import is_session_id
from memsvc.core.layout import TenantLayout
from memsvc.core.reasons import Reason
from memsvc.core.records import Record

log = logging.getLogger(__name__)

Action = Literal["reset", "reset_all", "remove", "delete", "replace"]
"""reset keeps summary.json, reset_all deletes it too, remove deletes the session, delete deletes `ids`, replace
does what reset_all does and then stores `records`."""


class Intent(msgspec.Struct, frozen=True):
    session_id: str
    action: Action
    next_id: int
    "The session's next message id when the operation began: ids keep increasing after a Reset."
    ids: tuple[int, ...] = ()
    "delete: the messages to delete."
    records: tuple[Record, ...] = ()
    "replace: the new history, its ids given, so a completion after a kill stores exactly what was acknowledged."


class Intents:
    """The records beside one tenant's session directories."""

    def __init__(self, places: TenantLayout):
        self.places = places
        self._interrupted: dict[str, Intent] = {}
        for path in places.sessions_dir.glob(f".{layout.INTENT}*.tmp"):
            path.unlink()  # an atomic write a kill interrupted: that intent was never recorded
        for path in sorted(places.sessions_dir.glob(f"{layout.INTENT}*")):
            intent = self._read(path)
            if intent is not None:
                self._interrupted[intent.session_id] = intent
        if self._interrupted:
            log.warning("interrupted resets or removals found; they are completed before serving",
                        extra={"sessions": sorted(self._interrupted)})

    def _path(self, session_id: str) -> Path:
        return self.places.beside(layout.INTENT, session_id)

    def _read(self, path: Path) -> Intent | None:
        try:
            intent = msgspec.json.decode(path.read_bytes(), type=Intent)
        except (OSError, msgspec.DecodeError) as exc:
            # Written atomically, so this is outside damage: the operation is not known, so it is
            # not guessed at; the session stays as it is and a person can look at the file.
            log.error("unreadable intent record left in place; the session is not cleared",
                      extra={"path": str(path), "error": str(exc)})
            return None
        return intent if is_session_id(intent.session_id) and path == self._path(intent.session_id) else None

    def begin(self, intent: Intent) -> None:
        """Record `intent` durably; from here on the operation will be completed."""
        durable.atomic_write(self._path(intent.session_id), msgspec.json.encode(intent))

    def done(self, session_id: str) -> None:
        """Every store has done its part: forget the intent."""
        durable.remove_file(self._path(session_id))
        self._interrupted.pop(session_id, None)

    def failed(self, intent: Intent) -> None:
        """The operation stopped part way: the session is refused until it is completed."""
        self._interrupted[intent.session_id] = intent

    def interrupted(self, session_id: str) -> Intent | None:
        return self._interrupted.get(session_id)

    def is_interrupted(self, session_id: str) -> bool:
        return session_id in self._interrupted

    def refuse_interrupted(self, session_id: str) -> None:
        """UNAVAILABLE while the session's interrupted Reset, removal or deletion is not completed."""
        interrupted = self._interrupted.get(session_id)
        if interrupted is not None:
            raise Unavailable(f"an interrupted {interrupted.action.replace('_', ' ')} of session {session_id!r} is "
                              "being completed; retry shortly", reason=Reason.SESSION_BEING_CLEARED)

    def all_interrupted(self) -> list[Intent]:
        return list(self._interrupted.values())
