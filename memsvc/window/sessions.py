"""Sessions: tier 1, the source of truth for recent messages.

Owns `sessions/<id>/` (history.json, and the directory's life: a Reset
deletes the summary tier's files by name), the in-memory copy of each open
session's recent messages, id assignment, idempotency, validation
of what is appended, and one writer per session. Open sessions are kept in
memory (least recently used closed past `max_open_sessions`) so no request
re-decodes history.json. A session held while it moves to another shard
(holds.py) is refused on every call about it, and so is creating a session
while creation is paused. Must never block on, or know about, the derived
stores (archive, vectors): they learn of changes through the DerivedStore
calls and catch up in their own time.
"""

from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec

from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    storage_error,
)
from memsvc.core.ids import check_session_id, is_session_id
from memsvc.core.records import ROLES, Record
from memsvc.runtime import metrics
from memsvc.window import history, legacy
from memsvc.window.derived import DerivedStore, EmbeddingSink
from memsvc.window.holds import Holds

MAX_SENDER_CHARS = 256
MAX_IDEMPOTENCY_KEY_CHARS = 256
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000


class NewMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str
    sender: str = ""
    send_at: int = 0
    "UTC Unix nanoseconds; 0 means now (or the time in a legacy header)."
    embedding: list[float] = []
    "A client-supplied embedding; empty means the server's embedder makes one."


class AppendResult(msgspec.Struct):
    records: list[Record]
    replayed: bool


class SessionInfo(msgspec.Struct):
    session_id: str
    message_count: int
    history_bytes: int
    last_append: int
    "UTC Unix nanoseconds (history.json's modification time)."
    has_summary: bool


class Session:
    """One open session. Mutations hold `lock`; readers take the list as it is."""

    def __init__(self, session_id: str, directory: Path):
        self.id = session_id
        self.directory = directory
        self.history_path = directory / "history.json"
        self.summary_path = directory / "summary.json"
        self.next_id_path = directory / ".next_id"
        self.lock = threading.Lock()
        self.closed = False
        loaded = history.load(self.history_path)
        self.records: list[Record] = loaded.records
        self.size = loaded.size
        self.replies: dict[str, list[Record]] = {}
        for record in self.records:
            if record.idempotency_key:
                self.replies.setdefault(record.idempotency_key, []).append(record)
        self._lowered: dict[int, str] = {}
        try:
            self.floor_id = int(self.next_id_path.read_text())
        except (FileNotFoundError, ValueError):
            self.floor_id = 1

    @property
    def next_id(self) -> int:
        """Ids never repeat in a session, even after Reset emptied its history."""
        return max(self.records[-1].id + 1 if self.records else 1, self.floor_id)

    def lowered(self, record: Record) -> str:
        """The record's content in lower case, computed once (keyword search scans it often)."""
        text = self._lowered.get(record.id)
        if text is None:
            text = self._lowered[record.id] = record.content.lower()
        return text


class Sessions:
    """Every session of the data root; opens them on first use and keeps the open ones in memory.

    `derived` stores hear of every change; `embeddings` takes vectors clients
    supply (None: refuse them); `on_oversize(session_id)` is called after an
    Append leaves history.json over max_history_bytes (it must return at once:
    compaction happens elsewhere).
    """

    def __init__(self, settings: Settings, *, derived: Sequence[DerivedStore], embeddings: EmbeddingSink | None,
                 on_oversize: Callable[[str], None], clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.root = settings.sessions_dir
        self.clock = clock
        self.derived = tuple(derived)
        self.embeddings = embeddings
        self.on_oversize = on_oversize
        self._open: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._registry = threading.Lock()
        durable.ensure_dir(self.root)
        durable.sweep_deleted(self.root)
        self.holds = Holds(self.root, clock)
        "Sessions held while they move to another shard: every call about one is refused (holds.py)."
        self.stored = sum(1 for entry in self.root.iterdir() if entry.is_dir() and is_session_id(entry.name))
        "Session directories on disk, counted against max_sessions."
        metrics.gauge("sessions", "Sessions stored on disk.", lambda: self.stored)
        metrics.gauge("open_sessions", "Sessions held in memory.", lambda: len(self._open))

    # -- opening -----------------------------------------------------------

    def directory(self, session_id: str) -> Path:
        """The session's directory, for every call about it: UNAVAILABLE while the session is held."""
        self.holds.refuse(check_session_id(session_id))
        return self.root / session_id

    def exists(self, session_id: str) -> bool:
        return self.directory(session_id).is_dir()

    def _get(self, session_id: str) -> Session:
        with self._registry:
            session = self._open.get(session_id)
            if session is not None:
                self._open.move_to_end(session_id)
                return session
            session = Session(session_id, self.directory(session_id))
            self._open[session_id] = session
            self._evict()
        for store in self.derived:
            store.recover(session_id, list(session.records))
        return session

    def _evict(self) -> None:
        while len(self._open) > self.settings.max_open_sessions:
            for candidate_id, candidate in self._open.items():
                if candidate.lock.acquire(blocking=False):
                    candidate.closed = True
                    candidate.lock.release()
                    del self._open[candidate_id]
                    for store in self.derived:
                        store.closed(candidate_id)
                    break
            else:
                return  # every open session is busy: over the limit until one is free

    @contextmanager
    def writing(self, session_id: str) -> Iterator[Session]:
        """The session, locked against other writers for the block."""
        while True:
            session = self._get(session_id)
            with session.lock:
                if not session.closed:
                    yield session
                    return

    def reading(self, session_id: str) -> Session | None:
        """The open session for readers, or None when it has never been written."""
        if not self.exists(session_id):
            return None
        return self._get(session_id)

    # -- tier 1 ------------------------------------------------------------

    def append(self, session_id: str, messages: list[NewMessage], idempotency_key: str = "") -> AppendResult:
        """Store `messages` durably at the end of the session, then tell the derived stores."""
        check_session_id(session_id)
        self._check_messages(messages)
        if len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
            raise InvalidArgument(f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
                                  reason="IDEMPOTENCY_KEY_TOO_LONG")
        embeddings = [message.embedding for message in messages]
        supplied = any(embeddings)
        if supplied:
            if self.embeddings is None:
                raise FailedPrecondition("this server takes no client-supplied embeddings",
                                         reason="EMBEDDINGS_NOT_ACCEPTED")
            self.embeddings.check(session_id, embeddings)
        records = [self._record(message, idempotency_key) for message in messages]
        with self.writing(session_id) as session:
            if idempotency_key and idempotency_key in session.replies:
                return AppendResult(session.replies[idempotency_key], replayed=True)
            for offset, record in enumerate(records):
                record.id = session.next_id + offset
            try:
                if session.size == 0 and not session.directory.is_dir():
                    self._create(session.directory)
                session.size = history.append(session.history_path, session.size, records)
            except OSError as exc:
                raise storage_error(exc, f"appending to session {session_id}") from exc
            session.records.extend(records)
            if idempotency_key:
                session.replies[idempotency_key] = records
            oversize = session.size > self.settings.max_history_bytes
            # Under the session lock, so a Reset or Compact can never overtake
            # this news in a derived store (the calls are quick by contract).
            if supplied and self.embeddings is not None:
                self.embeddings.supplied(session_id, records, embeddings)
            for store in self.derived:
                store.appended(session_id, records)
        if oversize:
            self.on_oversize(session_id)
        return AppendResult(records, replayed=False)

    def _create(self, directory: Path) -> None:
        """Make a new session's directory if max_sessions allows one more."""
        self.holds.refuse_creation()
        with self._registry:
            if self.stored >= self.settings.max_sessions:
                raise ResourceExhausted(
                    f"this server already stores {self.stored} sessions (max_sessions): remove one or raise the "
                    "setting; existing sessions keep working", reason="SESSION_QUOTA_EXCEEDED")
            self.stored += 1
        try:
            durable.ensure_dir(directory)
        except BaseException:
            with self._registry:
                self.stored -= 1
            raise

    def _check_messages(self, messages: list[NewMessage]) -> None:
        if not messages:
            raise InvalidArgument("messages is empty: send at least one message", reason="NO_MESSAGES")
        if len(messages) > self.settings.max_messages_per_request:
            raise InvalidArgument(
                f"{len(messages)} messages in one Append; at most {self.settings.max_messages_per_request}",
                reason="TOO_MANY_MESSAGES")
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if message.role not in ROLES:
                raise InvalidArgument(f"{where}.role must be one of {', '.join(ROLES)}", reason="INVALID_ROLE")
            if not message.content.strip():
                raise InvalidArgument(f"{where}.content is empty", reason="EMPTY_CONTENT")
            size = len(message.content.encode("utf-8", "surrogatepass"))
            if size > self.settings.max_message_bytes:
                raise InvalidArgument(
                    f"{where}.content is {size} bytes; at most {self.settings.max_message_bytes} "
                    "(max_message_bytes): split it or store it elsewhere", reason="MESSAGE_TOO_LARGE")
            if len(message.sender) > MAX_SENDER_CHARS:
                raise InvalidArgument(f"{where}.sender is longer than {MAX_SENDER_CHARS} characters",
                                      reason="SENDER_TOO_LONG")
            if message.send_at < 0:
                raise InvalidArgument(f"{where}.send_at_unix_nano is negative", reason="INVALID_TIME")

    def _record(self, message: NewMessage, idempotency_key: str) -> Record:
        content, sender, send_at = legacy.resolve(message.content, message.sender, message.send_at)
        return Record(role=message.role, content=content, send_at=send_at or self.clock(), sender=sender,
                      idempotency_key=idempotency_key)

    def window(self, session_id: str) -> list[Record]:
        """The last max_history_messages messages, oldest first."""
        session = self.reading(session_id)
        if session is None:
            return []
        return session.records[-self.settings.max_history_messages:]

    def records_after(self, session_id: str, after_id: int) -> list[Record]:
        """The session's messages in history.json with an id above `after_id`, oldest first."""
        session = self.reading(session_id)
        if session is None:
            return []
        with session.lock:
            records = session.records
            return records[bisect.bisect_right(records, after_id, key=lambda record: record.id):]

    # -- listing -----------------------------------------------------------

    def list_page(self, page_size: int, page_token: str, id_contains: str = "") -> tuple[list[SessionInfo], str]:
        """One page of sessions ordered by id, only those whose id contains `id_contains` (ignoring
        case) when it is given; the token is the last id shown.

        `page_size` 0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE.
        """
        page_size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        if page_token:
            check_session_id(page_token)
        needle = id_contains.casefold()
        names = sorted(entry.name for entry in self.root.iterdir()
                       if entry.is_dir() and is_session_id(entry.name) and entry.name > page_token
                       and needle in entry.name.casefold())
        page = names[:page_size]
        infos = [info for name in page if (info := self._info(name)) is not None]
        return infos, page[-1] if len(names) > page_size else ""

    def _info(self, session_id: str) -> SessionInfo | None:
        directory = self.root / session_id
        try:
            stat = (directory / "history.json").stat()
            size, modified = stat.st_size, stat.st_mtime_ns
        except FileNotFoundError:
            size, modified = 0, 0
        has_summary = (directory / "summary.json").exists()
        with self._registry:
            session = self._open.get(session_id)
        if session is not None:
            count = len(session.records)
        elif size:
            count = _count_records(directory / "history.json")
        else:
            count = 0
        return SessionInfo(session_id, count, size, modified, has_summary)

    # -- cutting (the caller holds session.lock; lifecycle.py decides when) -----

    def trim(self, session: Session, cut: int) -> list[Record]:
        """Drop the first `cut` records from history.json; returns them."""
        removed, kept = session.records[:cut], session.records[cut:]
        try:
            session.size = history.rewrite(session.history_path, kept)
        except OSError as exc:
            raise storage_error(exc, f"compacting session {session.id}") from exc
        session.records = kept
        session._lowered = {}
        return removed

    def clear(self, session: Session, drop_summary: bool) -> tuple[int, bool]:
        """Delete history.json (and summary.json); returns (messages deleted, summary deleted)."""
        count = len(session.records)
        try:
            durable.atomic_write(session.next_id_path, str(session.next_id).encode())
            session.floor_id = session.next_id
            durable.remove_file(session.history_path)
            summary_deleted = False
            if drop_summary:
                summary_deleted = durable.remove_file(session.summary_path)
                durable.remove_file(session.directory / ".summary_cursor")
        except OSError as exc:
            raise storage_error(exc, f"resetting session {session.id}") from exc
        session.records, session.size, session.replies, session._lowered = [], 0, {}, {}
        return count, summary_deleted

    def remove(self, session: Session) -> None:
        """Delete the session's directory and forget it."""
        existed = session.directory.is_dir()
        try:
            durable.remove_tree(session.directory)
        except OSError as exc:
            raise storage_error(exc, f"removing session {session.id}") from exc
        session.closed = True
        with self._registry:
            self.stored -= existed
            if self._open.get(session.id) is session:
                del self._open[session.id]

    def last_writes(self, prefix: str = "") -> list[tuple[str, int]]:
        """(session id, last history write in UTC ns) of stored sessions whose id starts with `prefix`."""
        found = []
        for entry in self.root.iterdir():
            if entry.is_dir() and entry.name.startswith(prefix) and is_session_id(entry.name):
                try:
                    found.append((entry.name, (entry / "history.json").stat().st_mtime_ns))
                except FileNotFoundError:
                    found.append((entry.name, entry.stat().st_mtime_ns))
        return found

    # -- moving (window/moves.py decides when) --------------------------------

    def forget(self, session: Session) -> None:
        """Drop an open session from memory (it is held, and read from disk while it moves); the
        caller holds its lock."""
        session.closed = True
        with self._registry:
            if self._open.get(session.id) is session:
                del self._open[session.id]
        for store in self.derived:
            store.closed(session.id)

    def install(self, session_id: str, staged: Path) -> None:
        """Give an imported session, written complete in `staged`, its place in one rename, counted
        against max_sessions."""
        target = self.root / check_session_id(session_id)
        with self._registry:
            if target.exists():
                raise AlreadyExists(f"session {session_id!r} is already stored here: remove it first to import it "
                                    "again", reason="SESSION_EXISTS")
            if self.stored >= self.settings.max_sessions:
                raise ResourceExhausted(f"this server already stores {self.stored} sessions (max_sessions): remove "
                                        "one or raise the setting", reason="SESSION_QUOTA_EXCEEDED")
            try:
                durable.publish(staged, target)
            except OSError as exc:
                raise storage_error(exc, f"importing session {session_id}") from exc
            self.stored += 1
            cached = self._open.pop(session_id, None)
        if cached is not None:  # an empty copy opened before the import must not shadow the files
            cached.closed = True

    def require(self, session_id: str) -> Session:
        session = self.reading(session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} does not exist", reason="SESSION_NOT_FOUND")
        return session


def _count_records(path: Path) -> int:
    """Records in a closed session's history without decoding it.

    Every stored record starts with `{"id":` and that byte sequence cannot
    occur inside a JSON string (its quotes would be escaped).
    """
    try:
        return path.read_bytes().count(b'{"id":')
    except FileNotFoundError:
        return 0
