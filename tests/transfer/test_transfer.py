"""Export, import, holds and drops on the assembled domain: two Apps over two temp data
directories stand for two shards, with their real archives (Tantivy on disk) and vectors."""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from memsvc.app import App
from memsvc.core import config
from memsvc.core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, Unavailable
from memsvc.core.layout import CURSOR, SUMMARY_RUN
from memsvc.lifecycle.intents import Intent
from memsvc.search.query import Query
from memsvc.summary import rolling
from memsvc.summary.cursor import read_cursor, write_cursor
from memsvc.summary.runs import Run, read_run, write_run
from memsvc.transfer.parts import End, Part
from memsvc.window.incoming import NewMessage

T0 = 1_735_732_800_000_000_000


def make_app(root: Path, **values: str) -> App:
    return App(config.load({"data_dir": str(root), "archive_commit_seconds": "0.01", "max_history_messages": "2",
                            "embedder": "builtin", **values}, environ={}))


@pytest.fixture
def shards(tmp_path: Path) -> Iterator[tuple[App, App]]:
    first, second = make_app(tmp_path / "a", shard_name="a"), make_app(tmp_path / "b", shard_name="b")
    yield first, second
    first.close()
    second.close()


def talk(app: App, session: str, pairs: int, start: int = 0, size: int = 0) -> None:
    for index in range(start, start + pairs):
        app.tenant().appender.append(session, [
            NewMessage(role="user", content=f"question {index} about billing" + "x" * size, send_at=T0 + index * 10),
            NewMessage(role="assistant", content=f"answer {index}", sender="planner", send_at=T0 + index * 10 + 1)],
            idempotency_key=f"key-{index}")


def a_lived_session(app: App, session: str = "s") -> None:
    """Reset once (ids go on above the floor), then talk, summarized and compacted."""
    talk(app, session, 2)
    app.tenant().clearing.reset(session, keep_summary=True)
    talk(app, session, 6, start=2)
    directory = app.tenant().store.directory(session)
    rolling.save(directory / "summary.json", rolling.from_dict(
        {"key_decisions": ["Do: deploy on Tuesdays"], "current_discussion": {"topic": "billing"}, "mood": "calm"}))
    write_cursor(directory / CURSOR, app.tenant().store.window(session)[0])
    write_run(directory / SUMMARY_RUN, Run(trigger="job", started_at=T0, finished_at=T0 + 5, outcome="failed",
                                           messages=3, reason="LLM_UNAVAILABLE", message="LLM endpoint down"))
    assert app.tenant().compaction.compact(session).removed == 10


def without_provenance(parts: list[Part]) -> list[Part]:
    head = parts[0].head
    assert head is not None
    return [msgspec.structs.replace(parts[0], head=msgspec.structs.replace(head, exported_by="", exported_at=0)),
            *parts[1:]]


def test_an_exported_session_imports_as_the_same_session(shards: tuple[App, App]) -> None:
    first, second = shards
    a_lived_session(first)
    parts = list(first.tenant().transfers.export("s", page_size=3))
    head, end = parts[0].head, parts[-1].end
    assert head is not None and end is not None
    assert (head.next_id, head.first_recent_id, head.recent_messages, head.exported_by) == (17, 15, 2, "a")
    assert head.start_at == first.tenant().archive.start_at("s") > 0 and '"mood": "calm"' in head.summary_json
    assert head.cursor == read_cursor(first.tenant().store.directory("s") / CURSOR)
    assert head.last_run == read_run(first.tenant().store.directory("s") / SUMMARY_RUN) is not None
    assert max(len(part.records) for part in parts) == 3 and end == End(12, 16, end.sha256)
    ids = [record.id for part in parts for record in part.records]
    assert ids == list(range(5, 17)), "archived ones first, then history.json, ids as they were"

    imported = second.tenant().transfers.restore(iter(parts))
    assert (imported.session_id, imported.end, imported.held) == ("s", end, False)
    assert without_provenance(list(second.tenant().transfers.export("s", page_size=3))) == without_provenance(parts)
    assert [r.content for r in second.tenant().store.window("s")] == ["question 7 about billing", "answer 7"]
    archived = second.tenant().searcher.search(Query(session_id="s", text="billing", match="keyword", limit=32))
    assert sorted(hit.record.id for hit in archived.hits) == [5, 7, 9, 11, 13, 15]
    assert second.tenant().contexts.stored("s") == first.tenant().contexts.stored("s")
    again = second.tenant().appender.append("s", [NewMessage(role="user", content="question 7 about billing")],
                                   idempotency_key="key-7")
    assert again.replayed and [r.id for r in again.records] == [15, 16], "a retried Append is recognized"
    later = second.tenant().appender.append("s", [NewMessage(role="user", content="next")])
    assert later.records[0].id == 17


FRAMEWORK = [
    NewMessage(role="system", content="You are the billing agent.", send_at=T0 + 1),
    NewMessage(role="user", content="what does invoice 7 say?", sender="ada", send_at=T0 + 2),
    NewMessage(role="assistant", content="looking it up", send_at=T0 + 3,
               payload='{"tool_calls": [{"id": "c1", "function": {"name": "invoice", "arguments": "{\\"n\\": 7}"}}]}'),
    NewMessage(role="tool", content="invoice 7: 120 EUR", send_at=T0 + 4, payload='{"tool_call_id": "c1"}'),
    NewMessage(role="assistant", content="it says 120 EUR", send_at=T0 + 5, payload='{"x": [1, 2.5e3, null, "é"]}'),
]


def every_message(app: App, session: str) -> list[tuple[int, str, str, str, int, str]]:
    """What ListMessages shows of a session, archive and history.json, oldest first."""
    records, token = [], ""
    while True:
        page = app.tenant().transcript.page(session, 2, token)
        records += page.records
        if not (token := page.next_token):
            return [(r.id, r.role, r.content, r.sender, r.send_at, r.payload) for r in records]


def test_roles_payloads_and_deletions_travel_exactly(shards: tuple[App, App]) -> None:
    first, second = shards
    first.tenant().appender.append("s", FRAMEWORK, idempotency_key="turn-1")
    first.tenant().appender.append("s", FRAMEWORK, idempotency_key="turn-2")
    assert first.tenant().compaction.compact("s").removed == 5, "the first turn is archived"
    first.tenant().clearing.delete_messages("s", ids=[2, 4])  # one archived message of each role with a payload
    first.tenant().clearing.delete_messages("s", last=1)  # the newest: the id floor must outlive it
    before = every_message(first, "s")
    assert [row[0] for row in before] == [1, 3, 5, 6, 7, 8, 9]
    parts = list(first.tenant().transfers.export("s", page_size=2))
    head = parts[0].head
    assert head is not None and (head.next_id, head.first_recent_id, head.recent_messages) == (11, 6, 4)
    exported = [record for part in parts for record in part.records]
    assert [r.id for r in exported] == [1, 3, 5, 6, 7, 8, 9], "deleted messages stay deleted"
    assert {r.role for r in exported} == {"system", "user", "assistant", "tool"}
    assert exported[2].idempotency_key == "" and exported[-1].idempotency_key == "turn-2", \
        "the keys history.json keeps (the archive keeps none)"

    second.tenant().transfers.restore(iter(parts))
    assert every_message(second, "s") == before
    assert [r.payload for r in second.tenant().store.window("s")] == [FRAMEWORK[2].payload, FRAMEWORK[3].payload]
    assert without_provenance(list(second.tenant().transfers.export("s", page_size=2))) == without_provenance(parts)
    hits = second.tenant().searcher.search(Query(session_id="s", text="invoice", match="keyword", limit=32)).hits
    assert sorted(hit.record.id for hit in hits) == [7, 9], "what was deleted is not found either"
    assert second.tenant().appender.append("s", [NewMessage(role="user", content="and invoice 8?")]).records[0].id == 11


def test_an_export_completes_an_interrupted_deletion_first(shards: tuple[App, App]) -> None:
    first, _ = shards
    talk(first, "s", 4)
    intent = Intent("s", "delete", 9, (2, 3))
    first.tenant().store.intents.begin(intent)  # as a DeleteMessages leaves it when a store failed half way
    first.tenant().store.intents.failed(intent)
    with pytest.raises(Unavailable) as refused:
        first.tenant().store.window("s")
    assert refused.value.reason == "SESSION_BEING_CLEARED"
    exported = [record.id for part in first.tenant().transfers.export("s") for record in part.records]
    assert exported == [1, 4, 5, 6, 7, 8], "the deletion was completed, then exported"
    assert first.tenant().store.intents.is_interrupted("s") is False
    assert [r.id for r in first.tenant().store.window("s")] == [7, 8]


def test_a_deletion_of_archived_messages_during_an_export_fails_it_before_its_end(shards: tuple[App, App]) -> None:
    first, second = shards
    talk(first, "s", 10)
    first.tenant().compaction.compact("s")
    export = first.tenant().transfers.export("s", page_size=2)
    assert [record.id for record in next(export).records + next(export).records] == [1, 2]
    first.tenant().clearing.delete_messages("s", ids=[1, 5])  # the export's lock on the session ended with its snapshot
    with pytest.raises(Unavailable) as refused:
        list(export)
    assert refused.value.reason == "SESSION_CHANGED"
    with pytest.raises(InvalidArgument) as incomplete:  # what was streamed never makes a session
        second.tenant().transfers.restore(iter([*first.tenant().transfers.export("s")][:-1]))
    assert incomplete.value.reason == "IMPORT_INCOMPLETE"
    assert second.tenant().transfers.restore(first.tenant().transfers.export("s")).end.messages == 18


def test_an_export_streams_in_pages_and_never_holds_the_session_whole(tmp_path: Path) -> None:
    app = make_app(tmp_path / "big")
    try:
        for batch in range(20):  # 20,000 messages of about 1 kB
            app.tenant().appender.append("long", [NewMessage(role="user" if n % 2 == 0 else "assistant",
                                                    content=f"{batch}-{n} " + "y" * 1000) for n in range(1000)])
        # Compact waits at most 5 s for the archive (then ARCHIVE_BEHIND, retry later): indexing 20 MB can take
        # longer on a busy machine, so the archive is caught up first.
        app.tenant().archive.flush(120)
        app.tenant().compaction.compact("long")
        app.tenant().archive.flush()
        settle(app, "long")
        # tracemalloc counts every thread's allocations: measured once the background work that opening,
        # embedding and compacting the session starts is over (its vectors loaded, 4 MB, and rebuilt without
        # the compacted 19,998: 17 MB counted when that build overlapped the export), so what it counts is the
        # export's.
        tracemalloc.start()
        count, largest = 0, 0
        for part in app.tenant().transfers.export("long"):
            count += len(part.records)
            largest = max(largest, len(part.records))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        app.close()
    assert count == 20_000 and largest <= 500
    print(f"export peak: {peak} bytes for 20,000 messages of 1 kB")
    # A part is 0.5 MB; an export holding the session whole (its 20 MB of content, Records and their
    # encoding) would far exceed a quarter of it.
    assert peak < 5_000_000, f"{peak} bytes at the peak, for 20 MB of messages"


def settle(app: App, session: str) -> None:
    """Wait until the session is open with its vectors in memory, nothing left to embed, and the build that
    leaves out the compacted messages' vectors installed: its index then holds just history.json's messages."""
    kept = len(app.tenant().store.require(session).records)
    deadline = time.monotonic() + 120
    while app.tenant().vectors.ready_rows(session) != kept and time.monotonic() < deadline:
        time.sleep(0.1)
    assert app.tenant().vectors.ready_rows(session) == kept


@pytest.mark.parametrize(("mangle", "reason"), [
    (lambda parts: parts[:-1], "IMPORT_INCOMPLETE"),
    (lambda parts: parts[1:], "IMPORT_HEAD_MISSING"),
    (lambda parts: [parts[0], parts[2], parts[1], *parts[3:]], "IMPORT_OUT_OF_ORDER"),
    (lambda parts: [*parts[:-1], msgspec.structs.replace(parts[-1], end=End(12, 16, "0" * 64))], "IMPORT_MISMATCH"),
    (lambda parts: [*parts[:2], msgspec.structs.replace(parts[2], records=[
        msgspec.structs.replace(record, content=record.content + "!") for record in parts[2].records]), *parts[3:]],
     "IMPORT_MISMATCH"),
    (lambda parts: [*parts, parts[1]], "IMPORT_OUT_OF_ORDER"),
])
def test_an_import_that_breaks_off_or_does_not_check_out_stores_nothing(shards: tuple[App, App], mangle,
                                                                        reason: str) -> None:
    first, second = shards
    a_lived_session(first)
    parts = mangle(list(first.tenant().transfers.export("s", page_size=4)))
    with pytest.raises(InvalidArgument) as refused:
        second.tenant().transfers.restore(iter(parts))
    assert refused.value.reason == reason
    assert not second.tenant().store.exists("s") and not second.tenant().transfers.moves.staged()
    second.tenant().archive.flush()
    assert second.tenant().archive.count("s") == 0, "not even the archive keeps what arrived"
    again = second.tenant().transfers.restore(iter(first.tenant().transfers.export("s")))
    assert again.end.messages == 12, "and it can come again"


def test_an_import_never_overwrites_a_stored_session(shards: tuple[App, App]) -> None:
    first, second = shards
    a_lived_session(first)
    talk(second, "s", 1)
    with pytest.raises(AlreadyExists) as refused:
        second.tenant().transfers.restore(iter(first.tenant().transfers.export("s")))
    assert refused.value.reason == "SESSION_EXISTS"
    assert [r.content for r in second.tenant().store.window("s")] == ["question 0 about billing", "answer 0"]


def test_a_held_session_is_refused_everywhere_but_exported_and_dropped_only_while_held(
        shards: tuple[App, App]) -> None:
    first, second = shards
    a_lived_session(first)
    with pytest.raises(FailedPrecondition, match="not held"):
        first.tenant().transfers.release("s", drop=True)
    assert first.tenant().transfers.hold("s") is True
    for call in (lambda: first.tenant().appender.append("s", [NewMessage(role="user", content="late")]),
                 lambda: first.tenant().contexts.for_turn("s"), lambda: first.tenant().contexts.stored("s"),
                 lambda: first.tenant().compaction.compact("s"),
                 lambda: first.tenant().clearing.reset("s", keep_summary=False),
                 lambda: first.tenant().searcher.search(Query(session_id="s", text="billing", match="keyword"))):
        with pytest.raises(Unavailable) as refused:
            call()
        assert refused.value.reason == "SESSION_MOVING"
    talk(first, "other", 1)  # the others are not held
    parts = list(first.tenant().transfers.export("s"))
    assert parts[-1].end is not None and parts[-1].end.messages == 12

    assert second.tenant().transfers.hold("s") is False, "the id is reserved for the import"
    with pytest.raises(Unavailable):
        second.tenant().appender.append("s", [NewMessage(role="user", content="too early")])
    assert second.tenant().transfers.restore(iter(parts)).held
    with pytest.raises(Unavailable):
        second.tenant().store.window("s")
    assert second.tenant().transfers.release("s", drop=False).was_held
    assert [r.content for r in second.tenant().store.window("s")] == ["question 7 about billing", "answer 7"]

    released = first.tenant().transfers.release("s", drop=True)
    assert released.was_held and released.deleted is not None
    assert (released.deleted.history_messages, released.deleted.archived_messages, released.deleted.summary) == \
        (2, 12, True)
    assert not first.tenant().store.exists("s") and first.tenant().archive.count("s") == 0
    with pytest.raises(NotFound):
        first.tenant().contexts.stored("s")


def test_holds_outlive_a_restart(tmp_path: Path) -> None:
    app = make_app(tmp_path / "a")
    talk(app, "s", 1)
    app.tenant().transfers.hold("s")
    app.tenant().transfers.hold("incoming")
    app.close()
    app = make_app(tmp_path / "a")
    try:
        with pytest.raises(Unavailable):
            app.tenant().store.window("s")
        assert app.tenant().transfers.held_page(10, "") == (["incoming", "s"], "")
        assert app.tenant().transfers.held_page(1, "") == (["incoming"], "incoming")
        placement = app.tenant().transfers.placement("incoming")
        assert (placement.stored, placement.held) == (False, True) and placement.hold_until > time.time_ns()
        app.tenant().transfers.release("s", drop=False)
        assert [r.content for r in app.tenant().store.window("s")] == ["question 0 about billing", "answer 0"]
    finally:
        app.close()


def test_a_reset_waits_for_an_export_to_end(shards: tuple[App, App]) -> None:
    first, _ = shards
    a_lived_session(first)
    export = first.tenant().transfers.export("s", page_size=2)
    next(export)  # the head: the export has begun
    reset = threading.Thread(target=first.tenant().clearing.reset, args=("s", False))
    reset.start()
    reset.join(0.5)
    assert reset.is_alive(), "Reset waits while the export streams"
    rest = list(export)
    reset.join(10)
    assert not reset.is_alive() and rest[-1].end is not None and rest[-1].end.messages == 12
    assert first.tenant().store.window("s") == []


def test_pausing_creation_refuses_new_sessions_only_and_lapses(shards: tuple[App, App]) -> None:
    first, _ = shards
    talk(first, "existing", 1)
    until = first.tenant().transfers.pause_creation(1)
    assert until > 0
    with pytest.raises(Unavailable) as refused:
        talk(first, "new", 1)
    assert refused.value.reason == "SESSION_CREATION_PAUSED"
    talk(first, "existing", 1, start=1)
    time.sleep(1.1)
    talk(first, "new", 1)
    assert first.tenant().transfers.pause_creation(5) > 0 and first.tenant().transfers.pause_creation(0) == 0
    talk(first, "newer", 1)
