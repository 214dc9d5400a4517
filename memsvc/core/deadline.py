"""How long a call's caller still waits, and whether it went away.

The transport makes one per call from what it knows (the gRPC deadline, a
cancelled call, an HTTP client's timeout) and hands it to the domain, which
bounds every wait of that call by it (a session's lock, a summary run, a
flush) and checks it right before it changes anything: so a call that
answered an error is never applied afterwards. A reply lost after the change
is the ordinary retry case, not this. Must never know what a transport is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from memsvc.core.errors import DeadlineExceeded
from memsvc.core.reasons import Reason


class Deadline:
    """`seconds` from now (None: the caller waits as long as it takes, as a job does)."""

    def __init__(self, seconds: float | None = None, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._at = None if seconds is None else clock() + max(seconds, 0.0)
        # A flag, not an Event: nothing waits on it, and every call makes a Deadline.
        self._gone = False

    def cancel(self) -> None:
        """The caller went away (or was answered): nothing more is to be changed for it."""
        self._gone = True

    def left(self) -> float | None:
        """Seconds the caller still waits; None when it waits as long as it takes."""
        if self._gone:
            return 0.0
        return None if self._at is None else max(0.0, self._at - self._clock())

    def passed(self) -> bool:
        return self.left() == 0.0

    def check(self, doing: str) -> None:
        """Raise DEADLINE_EXCEEDED when the caller stopped waiting before `doing` (nothing of it was done)."""
        if self.passed():
            raise DeadlineExceeded(f"the caller's deadline passed, or it went away, before {doing}: nothing was "
                                   "changed", reason=Reason.DEADLINE_EXCEEDED)

    def acquire(self, lock: threading.Lock, doing: str) -> None:
        """Take `lock` within the deadline, or raise DEADLINE_EXCEEDED without it."""
        left = self.left()
        if not lock.acquire(timeout=-1 if left is None else left):
            self.check(doing)
            raise DeadlineExceeded(f"{doing} waited past the caller's deadline: nothing was changed",
                                   reason=Reason.DEADLINE_EXCEEDED)

    def wait_for(self, changed: threading.Condition, predicate: Callable[[], bool], doing: str) -> None:
        """Wait on `changed` (held by the caller) until `predicate()`, within the deadline."""
        if not changed.wait_for(predicate, self.left()):
            raise DeadlineExceeded(f"{doing} waited past the caller's deadline: nothing was changed",
                                   reason=Reason.DEADLINE_EXCEEDED)


class _Unbounded(Deadline):
    def cancel(self) -> None:
        """Shared by all the server's own work: never cancelled."""


UNBOUNDED: Deadline = _Unbounded()
"For the server's own work (jobs, start-up): waits as long as it takes."
