"""The data directory's identity: a random id made the first time a server uses the directory.

Owns `<data_dir>/.id`, written once and then only read, so two servers that
report the same id serve the same data (GetServerInfo). Called under the
data-directory lock. Must never change an id once written.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from memsvc.core import durable

ID_FILE = ".id"


def data_dir_id(data_dir: Path) -> str:
    """The directory's id, made now if it has none (or only the empty file a crash left)."""
    path = data_dir / ID_FILE
    durable.ensure_dir(data_dir)
    try:
        written = path.read_text().strip()
    except FileNotFoundError:
        written = ""
    if written:
        return written
    made = uuid.uuid4().hex
    path.unlink(missing_ok=True)  # the empty file a crash left while the id was written
    durable.create_new(path, made.encode())
    return made
