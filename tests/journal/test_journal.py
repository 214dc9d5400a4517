"""The shared journal on a real file: while Appends arrive together its thread gathers as many into
each durable write as the last one carried, and never waits past its bound or a close."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memsvc.journal.journal import Journal


class Completions:
    """Done callbacks recording which frames completed, and with what."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException | None] = {}
        self.changed = threading.Condition()

    def done(self, name: str):
        def completed(error: BaseException | None) -> None:
            with self.changed:
                self.errors[name] = error
                self.changed.notify_all()

        return completed

    def wait(self, *names: str, timeout: float = 10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: all(name in self.errors for name in names), timeout)


def journal_of(tmp_path: Path, gather_seconds: float) -> Journal:
    (tmp_path / "s").mkdir()
    for name in ("a", "b"):
        (tmp_path / "s" / name).write_bytes(b"")  # the histories the Appends wrote, unsynced
    return Journal(tmp_path / ".journal", tmp_path, gather_seconds=gather_seconds)


def test_after_a_write_of_two_frames_the_next_waits_for_a_second(tmp_path: Path):
    journal = journal_of(tmp_path, gather_seconds=30.0)
    completions = Completions()
    try:
        journal.submit("s/a", 0, b"a1", completions.done("a1"), here=True)
        journal.submit("s/b", 0, b"b1", completions.done("b1"), here=True)
        journal.write_waiting()  # as the event loop writes the Appends of one of its turns
        assert completions.errors == {"a1": None, "b1": None}
        journal.submit("s/a", 2, b"a2", completions.done("a2"))
        assert not completions.wait("a2", timeout=0.3), "gathering: a2 waits for a second frame"
        journal.submit("s/b", 2, b"b2", completions.done("b2"))
        assert completions.wait("a2", "b2") and completions.errors["a2"] is None
    finally:
        journal.close()


def test_a_lone_frame_waits_no_longer_than_the_bound(tmp_path: Path):
    journal = journal_of(tmp_path, gather_seconds=0.05)
    completions = Completions()
    try:
        journal.submit("s/a", 0, b"a1", completions.done("a1"), here=True)
        journal.submit("s/b", 0, b"b1", completions.done("b1"), here=True)
        journal.write_waiting()
        started = time.monotonic()
        journal.submit("s/a", 2, b"a2", completions.done("a2"))
        assert completions.wait("a2") and completions.errors["a2"] is None
        assert time.monotonic() - started >= 0.04, "it did wait for company, up to its bound"
        journal.submit("s/a", 4, b"a3", completions.done("a3"))  # the last write carried one: it gathers none
        assert completions.wait("a3", timeout=5)
    finally:
        journal.close()


def test_close_writes_a_gathering_frame_at_once(tmp_path: Path):
    journal = journal_of(tmp_path, gather_seconds=30.0)
    completions = Completions()
    journal.submit("s/a", 0, b"a1", completions.done("a1"), here=True)
    journal.submit("s/b", 0, b"b1", completions.done("b1"), here=True)
    journal.write_waiting()
    journal.submit("s/a", 2, b"a2", completions.done("a2"))
    started = time.monotonic()
    journal.close()
    assert completions.errors.get("a2", "missing") is None and time.monotonic() - started < 10
