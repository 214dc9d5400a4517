"""Where everything lives under the data directory, and the one mapping from session ids to directories.

Owns every name memsvc gives on disk: the parts of the data directory (the
journal, `sessions/`, `.store/` with the archive, the vectors and the lesson
database), the files of a session directory, the prefixes of the entries
memsvc keeps beside session directories (holds, intents, imports in
progress), and how a session id becomes a directory name and back:

- an id that was valid before ids could be anything (A-Z a-z 0-9 . _ -,
  not starting with `.` or `-`, at most 128 characters) is its own name, so
  data directories written by earlier versions keep every session in place;
- any other id is escaped: `~`, then its UTF-8 bytes with A-Z a-z 0-9 . _ -
  as they are and every other byte as `%XX`, when that fits MAX_NAME bytes;
- a longer one is `#` and the SHA-256 of its bytes, the id itself recorded
  in the directory (ID_FILE) or in the entry beside it.

The three forms never collide: plain names start with A-Z a-z 0-9 or `_`,
escaped ones with `~`, hashed ones with `#`; MAX_NAME leaves room in a file
name's 255 bytes for the longest prefix and suffix memsvc adds. A tenant's
sessions and stores live apart (`Layout.tenant`); the default tenant's are
where a data directory without tenants keeps them. Must never decide whether
an id is valid (ids.py does) nor read or write a session's files besides its
id record.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import quote_from_bytes, unquote_to_bytes

from memsvc.core import durable

# -- a session directory's files ------------------------------------------------------------------------------
HISTORY = "history.json"
SUMMARY = "summary.json"
CURSOR = ".summary_cursor"
SUMMARY_RUN = ".summary_run.json"
"How the summarizer's last run on the session went."
NEXT_ID = ".next_id"
"The id floor: ids continue from here after a Reset or a deletion of the newest messages."
ID_FILE = ".session_id"
"The id of a session whose directory name is a hash."

# -- entries beside the session directories --------------------------------------------------------------------
HELD = ".held-"
"A session held while it moves to another shard."
INTENT = ".intent-"
"A Reset, removal or deletion recorded before any store changes."
STAGING = ".importing-"
"An import being written, before the one rename that makes it a session."
CREATING = ".creating-"
"A new session whose name is a hash, before the rename that gives it its place with its id record."

MAX_NAME = 200
"A directory name's bytes: 255 less the longest prefix (`.importing-`) and suffix (an atomic write's) added to it."
DEFAULT_TENANT = "default"

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_ESCAPED, _HASHED = "~", "#"
_KEPT = b"._-"
"Bytes an escaped name keeps as they are, besides ASCII letters and digits."


def is_plain(session_id: str) -> bool:
    """Whether the id is its own directory name (every id earlier versions accepted is)."""
    return _PLAIN.fullmatch(session_id) is not None


def directory_name(session_id: str) -> str:
    """The name of the session's directory (and of the entries beside it): plain, escaped or hashed."""
    if is_plain(session_id):
        return session_id
    encoded = session_id.encode("utf-8")
    escaped = _ESCAPED + quote_from_bytes(encoded, safe=_KEPT)
    if len(escaped) <= MAX_NAME:
        return escaped
    return _HASHED + hashlib.sha256(encoded).hexdigest()


def is_hashed(name: str) -> bool:
    return name.startswith(_HASHED)


def id_from_name(name: str) -> str | None:
    """The id a plain or escaped name stands for; None for a hashed name (its id is recorded inside) or a
    name memsvc does not give a session."""
    if is_plain(name):
        return name
    if name.startswith(_ESCAPED):
        try:
            session_id = unquote_to_bytes(name[1:]).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return session_id if directory_name(session_id) == name else None
    return None


def record_id(path: Path, session_id: str) -> None:
    """Keep the id of a session whose name is a hash in `path` (its directory's ID_FILE, or a marker)."""
    durable.atomic_write(path, session_id.encode("utf-8"))


def recorded_id(name: str, path: Path) -> str | None:
    """The id of the entry `name`, reading `path` (where its id is recorded) when the name is a hash; None
    when it names no session or its record is missing or does not match."""
    if not is_hashed(name):
        return id_from_name(name)
    try:
        session_id = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return session_id if directory_name(session_id) == name else None


class Layout:
    """The data directory's parts: what every tenant shares, and each tenant's own (`tenant`)."""

    def __init__(self, data_dir: Path | str):
        self.data_dir = Path(data_dir)
        self.journal = self.data_dir / ".journal"
        "The redo log of history.json appends, shared by every session."
        self.store_dir = self.data_dir / ".store"
        "What every tenant shares (the model table's copy), and the default tenant's stores."

    def tenant_names(self) -> list[str]:
        """The tenants, besides the default one, that have a directory here."""
        tenants = self.data_dir / "tenants"
        if not tenants.is_dir():
            return []
        return sorted(name for entry in tenants.iterdir() if (name := id_from_name(entry.name)) is not None
                      and entry.is_dir())

    def tenant(self, name: str = DEFAULT_TENANT) -> TenantLayout:
        if name == DEFAULT_TENANT:
            return TenantLayout(name, self.data_dir / "sessions", self.store_dir)
        base = self.data_dir / "tenants" / directory_name(name)
        return TenantLayout(name, base / "sessions", base / ".store")


class TenantLayout:
    """One tenant's sessions and stores."""

    def __init__(self, name: str, sessions_dir: Path, store_dir: Path):
        self.name = name
        self.sessions_dir = sessions_dir
        self.store_dir = store_dir
        "The archive keeps its index versions under store_dir/archive (archive/index.py)."
        self.vectors_dir = store_dir / "vectors"
        self.lessons_db = store_dir / "lessons.sqlite3"

    def session_dir(self, session_id: str) -> Path:
        return self.sessions_dir / directory_name(session_id)

    def beside(self, prefix: str, session_id: str) -> Path:
        """The entry of the session's hold, intent or import in progress, next to its directory."""
        return self.sessions_dir / f"{prefix}{directory_name(session_id)}"

    def session_id(self, entry: Path) -> str | None:
        """The id of the session directory `entry`; None when it is not one."""
        return recorded_id(entry.name, entry / ID_FILE)

    def stored(self) -> list[tuple[str, Path]]:
        """(id, directory) of every session directory, in no particular order."""
        found = []
        for entry in self.sessions_dir.iterdir():
            if entry.name[:1] != "." and entry.is_dir() and (session_id := self.session_id(entry)) is not None:
                found.append((session_id, entry))
        return found

    def besides(self, prefix: str) -> list[tuple[str, Path]]:
        """(id, entry) of the entries with `prefix` beside the session directories (a hashed one's id is
        recorded in it: the marker's bytes, or the staging directory's ID_FILE)."""
        found = []
        for entry in self.sessions_dir.glob(f"{prefix}*"):
            name = entry.name[len(prefix):]
            record = entry / ID_FILE if entry.is_dir() else entry
            if (session_id := recorded_id(name, record)) is not None:
                found.append((session_id, entry))
        return found
