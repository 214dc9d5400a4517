"""File descriptors: how many this process may open, and saying once in a while that it ran out.

Owns raising the soft descriptor limit to the hard one (as Go's runtime does at start), the room left for
connections once descriptors are kept back for storage, and `ResourceLog`, which reports a listener's
failures for want of descriptors or memory at most once per interval, counting the ones it did not report.
Must never decide how many connections a listener gets: its owner does, from this room.
"""

from __future__ import annotations

import errno
import logging
import resource
import threading
import time

log = logging.getLogger(__name__)

LOG_INTERVAL_SECONDS = 60.0
"A listener short of descriptors or memory says so at most once this often."
ACCEPT_RETRY_SECONDS = 0.5
"How long a listener waits, after an accept failed for want of descriptors or memory, before it tries again."
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"What an accept fails with when the process or the system is out of descriptors or memory."


def limit() -> int:
    """The descriptors this process may hold, after raising the soft limit as far as the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # a hard limit of "unlimited" the kernel caps lower (nr_open)
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class ResourceLog:
    """One listener's failures for want of descriptors or memory, logged at most once per interval."""

    def __init__(self, listener: str, interval: float = LOG_INTERVAL_SECONDS):
        self.listener, self.interval = listener, interval
        self._lock = threading.Lock()
        self._said_at: float | None = None
        self._unsaid = 0

    def failed(self, error: OSError) -> None:
        now = time.monotonic()
        with self._lock:
            if self._said_at is not None and now - self._said_at < self.interval:
                self._unsaid += 1
                return
            unsaid, self._unsaid, self._said_at = self._unsaid, 0, now
        log.error("cannot accept connections: out of file descriptors or memory; retrying", extra={
            "listener": self.listener, "error": error.strerror, "failures_since_last_said": unsaid,
            "what_to_do": "raise the descriptor limit (ulimit -n, systemd LimitNOFILE)"})
