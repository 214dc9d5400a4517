"""Named failure points in the write paths, for crash and fault tests.

The crash tests need to stop the server at exact places inside a write
(between the write and the fsync, between the fsync and the rename, before
an archive commit) and to make the disk fail on demand. Each such place
calls `hit(name)`; the environment variable MEMSVC_FAILPOINTS, read once at
import, says what happens there:

    MEMSVC_FAILPOINTS="durable.write_at.start=kill@3;archive.commit=eio*2;durable.fsync=delay:2ms"

`kill` ends the process with SIGKILL, `enospc` and `eio` raise the OSError a
full or failing disk would, `delay:2ms` (or `500us`, `1s`) sleeps there, as a
slow disk would (`durable.fsync` is every sync of memsvc's own files), and
`drop` makes the write at a point that asks `dropped(name)` vanish, as an
unsynced write does when the machine loses power; `@N` acts on the Nth hit
only, `*N` on the first N hits. Unset (production), `hit` is one dictionary
lookup. Must never be configured any other way, nor change behaviour when
unset.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import threading
import time

ENV = "MEMSVC_FAILPOINTS"
_SPEC = re.compile(r"(?P<name>[\w.]+)=(?P<action>kill|enospc|eio|drop|delay:(?P<delay>\d+(?:\.\d+)?)(?P<unit>us|ms|s))"
                   r"(?:(?P<mode>[@*])(?P<count>\d+))?")
_ERRORS = {"enospc": errno.ENOSPC, "eio": errno.EIO}
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


class _Point:
    def __init__(self, action: str, mode: str | None, count: int, delay: float = 0.0):
        self.action, self.mode, self.count, self.delay = action, mode, count, delay
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
            raise ValueError(f"{ENV}: cannot read {item!r}; expected name=kill|enospc|eio|drop|delay:Nms[@N|*N]")
        action, delay = match["action"], 0.0
        if match["delay"] is not None:
            action, delay = "delay", float(match["delay"]) * _SECONDS[match["unit"]]
        points[match["name"]] = _Point(action, match["mode"], int(match["count"] or 0), delay)
    return points


_points = parse(os.environ.get(ENV, ""))
_lock = threading.Lock()


def _due(name: str) -> _Point | None:
    point = _points.get(name)
    if point is None:
        return None
    with _lock:
        due = point.due()
    return point if due else None


def hit(name: str) -> None:
    point = _due(name)
    if point is not None:
        _act(point, name)


def _act(point: _Point, name: str) -> None:
    if point.action == "drop":
        return
    if point.action == "delay":
        time.sleep(point.delay)
        return
    if point.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    code = _ERRORS[point.action]
    raise OSError(code, f"{os.strerror(code)} (injected at {name})")


def dropped(name: str) -> bool:
    """True when the write at `name` must vanish (action `drop`); other actions act as in `hit`."""
    point = _due(name)
    if point is None:
        return False
    if point.action == "drop":
        return True
    _act(point, name)
    return False
