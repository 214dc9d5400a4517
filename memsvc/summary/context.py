"""What a turn gets from tier 1: the window, and the rolling summary as the
turn context; and the stored summary with its cursor and last run, as
GetSummary shows it.

Owns reading summary.json for requests (re-read only when the file changed,
one cached copy per recently used session) and choosing the entries a
request needs (the decision model, when one is configured and the request
text is given). Must never write: the summarizer does.
"""

from __future__ import annotations

import collections
import threading

import msgspec

from memsvc.core import layout, replies
from memsvc.core.records import Record
from memsvc.summary import rolling
from memsvc.summary.cursor import UnreadableCursor, read_cursor
from memsvc.summary.decisions import Judge
from memsvc.summary.rolling import Summary
from memsvc.summary.runs import Run, read_run
from memsvc.window.reading import SessionReader


class TurnContext(msgspec.Struct):
    window: list[Record]
    "The newest window messages that fit the reply budget, oldest first."
    summary: Summary | None
    "The entries kept for this turn; None when there is no summary or none of it is relevant."
    text: str
    "The turn context message's content (the `Prior summary` block); empty without a summary."
    omitted: int = 0
    "How many of the window's oldest messages were left out to keep the reply within max_reply_bytes."


class StoredSummary(msgspec.Struct):
    summary: Summary | None
    cursor_at: int
    "Send time (UTC ns) of the last summarized message; 0 before the first run."
    last_run: Run | None = None
    "How the summarizer's last run went; None when none is recorded (or its record is unreadable)."


class Contexts:
    def __init__(self, sessions: SessionReader, judge: Judge | None, *, cached_sessions: int,
                 reply_bytes: int = replies.DEFAULT_MAX_REPLY_BYTES):
        self.sessions = sessions
        self.judge = judge
        self.reply_bytes = reply_bytes
        self.cached_sessions = cached_sessions
        self._cache: collections.OrderedDict[str, tuple[int, Summary | None]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def summary(self, session_id: str) -> Summary | None:
        """The session's stored summary, re-read only when summary.json changed."""
        path = self.sessions.directory(session_id) / layout.SUMMARY
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            with self._lock:
                self._cache.pop(session_id, None)
            return None
        with self._lock:
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == stamp:
                self._cache.move_to_end(session_id)
                return cached[1]
        loaded = rolling.load(path)
        with self._lock:
            self._cache[session_id] = (stamp, loaded)
            self._cache.move_to_end(session_id)
            while len(self._cache) > self.cached_sessions:
                self._cache.popitem(last=False)
        return loaded

    def may_wait(self, request_text: str) -> bool:
        """True when the turn asks the decision model (an HTTP call): run it on a thread."""
        return bool(request_text) and self.judge is not None

    def for_turn(self, session_id: str, request_text: str = "", omit_payloads: bool = False) -> TurnContext:
        """The window's newest messages that fit max_reply_bytes beside the summary (MESSAGE_TOO_LARGE_FOR_REPLY
        when the newest alone does not), and the summary's entries relevant to `request_text`."""
        window = self.sessions.window(session_id)
        if omit_payloads:
            window = replies.without_payloads(window)
        summary = self.summary(session_id)
        if summary is not None and not summary.is_empty() and request_text and self.judge is not None:
            summary = self.judge.relevant(summary, window, request_text)
        if summary is None or summary.is_empty():
            return _within(window, None, "", self.reply_bytes)
        return _within(window, summary, rolling.turn_context(summary), self.reply_bytes)

    def stored(self, session_id: str) -> StoredSummary:
        """The summary as stored (all of it), its cursor and last run; NOT_FOUND for an unknown session."""
        self.sessions.require(session_id)
        directory = self.sessions.directory(session_id)
        try:
            cursor = read_cursor(directory / layout.CURSOR)
        except UnreadableCursor:  # logged; shown as no cursor, as an unreadable summary.json is shown as none
            cursor = None
        return StoredSummary(self.summary(session_id), cursor.send_at if cursor else 0,
                             read_run(directory / layout.SUMMARY_RUN))


def _within(window: list[Record], summary: Summary | None, text: str, reply_bytes: int) -> TurnContext:
    # The summary goes twice in a reply (its entries and its JSON), and its block once more as the turn context.
    summary_bytes = 0 if summary is None else len(text.encode()) + 2 * len(rolling.encode(summary))
    taken = replies.newest_fitting(window, reply_bytes - summary_bytes)
    return TurnContext(window[len(window) - taken:], summary, text, omitted=len(window) - taken)
