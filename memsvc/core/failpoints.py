"""Named failure points in the write paths, for crash and fault tests.

The crash tests need to stop the server at exact places inside a write
(between the write and the fsync, between the fsync and the rename, before
an archive commit) and to make the disk fail on demand. Each such place
calls `hit(name)`; the environment variable MEMSVC_FAILPOINTS, read once at
import, says what happens there:

    MEMSVC_FAILPOINTS="durable.write_at.written=kill@3;archive.commit=eio*2"

`kill` ends the process with SIGKILL, `enospc` and `eio` raise the OSError a
full or failing disk would; `@N` acts on the Nth hit only, `*N` on the first
N hits. Unset (production), `hit` is one dictionary lookup. Must never be
configured any other way, nor change behaviour when unset.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import threading

ENV = "MEMSVC_FAILPOINTS"
_SPEC = re.compile(r"(?P<name>[\w.]+)=(?P<action>kill|enospc|eio)(?:(?P<mode>[@*])(?P<count>\d+))?")
_ERRORS = {"enospc": errno.ENOSPC, "eio": errno.EIO}


class _Point:
    def __init__(self, action: str, mode: str | None, count: int):
        self.action, self.mode, self.count = action, mode, count
        self.hits = 0

    def due(self) -> bool:
        self.hits += 1
        if self.mode == "@":
            return self.hits == self.count
        if self.mode == "*":
            return self.hits <= self.count
        return True


def parse(text: str) -> dict[str, _Point]:
    points = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        match = _SPEC.fullmatch(item)
        if match is None:
            raise ValueError(f"{ENV}: cannot read {item!r}; expected name=kill|enospc|eio[@N|*N]")
        points[match["name"]] = _Point(match["action"], match["mode"], int(match["count"] or 0))
    return points


_points = parse(os.environ.get(ENV, ""))
_lock = threading.Lock()


def hit(name: str) -> None:
    point = _points.get(name)
    if point is None:
        return
    with _lock:
        due = point.due()
    if not due:
        return
    if point.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    code = _ERRORS[point.action]
    raise OSError(code, f"{os.strerror(code)} (injected at {name})")
