"""ImportSession checks everything it carries as strictly as an Append and as files loaded from disk: ids and
next_id within int64, times and the cursor within range, the summary read as summary.json is, history
compacted to max_history_bytes. A refused import stores nothing and breaks no other session (issue 24,
breaks 1, 5 and 7), and a session whose ids reach 2^63 - 1 refuses more, clearly."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from memsvc.core.records import MAX_ID, Record
from memsvc.transfer.parts import Digest
from memsvc_client import InvalidArgumentError, MemsvcError, ResourceExhaustedError
from memsvc_client.v1 import memory_pb2, shards_pb2
from tests.support import ServerProcess

pytestmark = pytest.mark.in_process

ROLES = {"user": memory_pb2.ROLE_USER, "assistant": memory_pb2.ROLE_ASSISTANT}


def stream(session_id: str, records: list[Record], *, next_id: int, recent: int | None = None,
           summary_json: str = "", cursor: tuple[int, int] | None = None,
           last_run: memory_pb2.SummaryRun | None = None) -> Iterator[shards_pb2.ImportSessionRequest]:
    """An export of `records`, all recent unless `recent` says how many of the newest are, with a true end."""
    recent = len(records) if recent is None else recent
    kept = records[len(records) - recent:]
    head = shards_pb2.SessionHead(session_id=session_id, next_id=next_id, first_recent_id=kept[0].id if kept else 0,
                                  summary_json=summary_json, recent_messages=recent, summary_last_run=last_run)
    if cursor is not None:
        head.summary_cursor.CopyFrom(shards_pb2.SummaryCursor(message_id=cursor[0], send_at_unix_nano=cursor[1]))
    yield shards_pb2.ImportSessionRequest(head=head)
    digest = Digest()
    for start in range(0, len(records), 500):
        page = records[start:start + 500]
        digest.add(page)
        yield shards_pb2.ImportSessionRequest(messages=[shards_pb2.ExportedMessage(message=memory_pb2.Message(
            id=record.id, role=ROLES[record.role], content=record.content, send_at_unix_nano=record.send_at))
            for record in page])
    end = digest.end()
    yield shards_pb2.ImportSessionRequest(end=shards_pb2.ExportEnd(messages=end.messages, last_id=end.last_id,
                                                                   sha256=end.sha256))


def turns(first_id: int, count: int, text: str = "turn {n} about the sandbox") -> list[Record]:
    return [Record(id=first_id + n, role="user" if n % 2 == 0 else "assistant", content=text.format(n=n),
                   send_at=1_000 + n) for n in range(count)]


def refused(client, requests, reason: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        client.import_session(requests)
    assert caught.value.reason == reason, caught.value


def others_still_work(server: ServerProcess, client) -> None:
    """The archive commits for other sessions, health says SERVING (break 1 made these UNAVAILABLE)."""
    client.append("bystander", [("user", "hello"), ("assistant", "hi")] * 10)
    assert client.compact("bystander").removed > 0
    assert client.reset("bystander").deleted.history_messages > 0
    assert server.health_status() == 1 and server.health_status("memsvc.archive") == 1


def test_ids_beyond_int64_are_refused_and_stop_nothing(server: ServerProcess):
    with server.client() as client:
        refused(client, stream("huge", [Record(id=2**64 - 3, role="user", content="x", send_at=1)],
                               next_id=2**64 - 1), "IMPORT_HEAD_INVALID")
        refused(client, stream("huge", [Record(id=2**63, role="user", content="x", send_at=1)],
                               next_id=2**63 + 1), "IMPORT_HEAD_INVALID")
        assert not client.list_sessions().sessions
        others_still_work(server, client)


def test_a_session_whose_ids_reach_the_last_one_refuses_more_clearly(server: ServerProcess):
    with server.client() as client:
        client.import_session(stream("edge", turns(MAX_ID - 2, 2), next_id=MAX_ID))
        assert [m.id for m in client.append("edge", [("user", "the last id")]).messages] == [MAX_ID]
        with pytest.raises(ResourceExhaustedError) as caught:
            client.append("edge", [("user", "one too many")])
        assert caught.value.reason == "SESSION_IDS_EXHAUSTED"
        assert [m.id for m in client.get_context("edge").window] == [MAX_ID - 2, MAX_ID - 1, MAX_ID]
        first = client.list_messages("edge", page_size=2)
        assert client.list_messages("edge", page_size=2, page_token=first.next_page_token).messages[0].id == MAX_ID
        newest = client.list_messages("edge", page_size=1, newest_first=True)
        assert client.list_messages("edge", page_size=1, newest_first=True,
                                    page_token=newest.next_page_token).messages[0].id == MAX_ID - 1
        assert client.search("edge", "sandbox", match="keyword", include_window=True).hits
        assert client.compact("edge").removed == 0
        others_still_work(server, client)


@pytest.mark.parametrize(("summary_json", "cursor"), [
    ('{"key_decisions": [], "past_discussions": [], "x": ' + "[" * 20_000 + "]" * 20_000 + "}", None),
    ('{"key_decisions": ["Do: a"]', None),
    ('{"only": "one key"}', None),
    ('{"key_decisions": [], "past_discussions": ["' + "x" * 1_100_000 + '"]}', None),
    ("", (99, 1)),
    ("", (1, -5)),
])
def test_summaries_and_cursors_are_checked_as_files_on_disk_are(server: ServerProcess, summary_json, cursor):
    with server.client() as client:
        with pytest.raises(MemsvcError) as caught:
            client.import_session(stream("s", turns(1, 2), next_id=3, summary_json=summary_json, cursor=cursor))
        assert caught.value.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
        if caught.value.code == grpc.StatusCode.INVALID_ARGUMENT:
            assert caught.value.reason in ("IMPORT_SUMMARY_INVALID", "IMPORT_HEAD_INVALID")
        assert not client.list_sessions().sessions


@pytest.mark.parametrize(("run", "reason"), [
    (dict(started_at_unix_nano=5, finished_at_unix_nano=4), "IMPORT_HEAD_INVALID"),
    (dict(started_at_unix_nano=-1, finished_at_unix_nano=4), "IMPORT_HEAD_INVALID"),
    (dict(started_at_unix_nano=1, finished_at_unix_nano=4, outcome=memory_pb2.SUMMARY_OUTCOME_UNSPECIFIED),
     "INVALID_ENUM"),
    (dict(started_at_unix_nano=1, finished_at_unix_nano=4, trigger=99), "INVALID_ENUM"),
])
def test_a_last_summary_run_is_checked_as_the_cursor_is(server: ServerProcess, run, reason):
    fields = dict(trigger=memory_pb2.SUMMARY_TRIGGER_JOB, outcome=memory_pb2.SUMMARY_OUTCOME_SUMMARIZED, messages=2)
    with server.client() as client:
        refused(client, stream("s", turns(1, 2), next_id=3, last_run=memory_pb2.SummaryRun(**{**fields, **run})),
                reason)
        assert not client.list_sessions().sessions


def test_a_summary_nested_too_deep_on_disk_is_served_as_none(server: ServerProcess):
    with server.client() as client:
        client.append("s", [("user", "hello")])
        path = server.data_dir / "sessions/s/summary.json"
        path.write_text('{"key_decisions": [], "past_discussions": [], "x": ' + "[" * 20_000 + "]" * 20_000 + "}")
        assert client.get_context("s").window[0].content == "hello"
        assert client.get_summary("s").summary is None


def test_an_import_larger_than_max_history_bytes_is_compacted_as_appends_would_leave_it(make_server):
    server = make_server("--max-history-bytes", "100000", "--max-message-bytes", "10000")
    with server.client() as client:
        records = turns(1, 3_000, "turn {n} of a long imported conversation about the sandbox")
        assert client.import_session(stream("long", records, next_id=3_001)).messages == 3_000
        history = server.data_dir / "sessions/long/history.json"
        assert history.stat().st_size <= 80_000, "cut to 80% of max_history_bytes, as auto compaction does"
        every = []
        token = ""
        while True:
            page = client.list_messages("long", page_size=1000, page_token=token)
            every += [m.id for m in page.messages]
            if not (token := page.next_page_token):
                break
        assert every == list(range(1, 3_001)), "nothing lost: the rest is in the archive"
        hits = client.search("long", "turn 7 of", match="keyword", limit=3).hits
        assert hits[0].message.id == 8 and hits[0].source == "archive"
        window = client.get_context("long").window
        assert window[-1].id == 3_000 and window[0].role == "user", "the cut falls after an assistant message"
