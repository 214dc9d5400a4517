"""Error memory end to end: every ErrorMemoryService RPC through a real server
(in the test's process; a process where one is killed), on each backend (its
SQLite file, a real PostgreSQL database), time moved by restarting it with
--clock-offset-seconds."""

from __future__ import annotations

import grpc
import pytest

from memsvc_client import ErrorRecord, MemsvcError
from tests.support import kill_during_burst

pytestmark = pytest.mark.in_process

DAY_SECONDS = 86_400
DAY_NANOS = DAY_SECONDS * 10**9


@pytest.fixture
def make_server(make_server, lessons_backend):
    """Servers of this module keep their lessons in the backend the test runs against."""
    return lambda *args, **kwargs: make_server(*lessons_backend.server_args, *args, **kwargs)


def moved(server, days: float):
    """Restart `server` with its clock `days` ahead of the wall clock."""
    server.args = [arg for arg in server.args if not arg.startswith("--clock-offset-seconds")]
    server.args.append(f"--clock-offset-seconds={days * DAY_SECONDS}")
    return server.restart()


def rejected(call, code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(MemsvcError) as caught:
        call()
    assert (caught.value.code, caught.value.reason) == (code, reason), caught.value


def all_records(client, **filters) -> list[ErrorRecord]:
    records, token = [], ""
    while True:
        page = client.list_errors(page_size=7, page_token=token, **filters)
        records += page.records
        token = page.next_page_token
        if not token:
            return records


def test_a_lesson_recorded_in_one_session_is_found_from_another(server):
    with server.client(server.tcp) as agent_a, server.client(server.unix) as agent_b:
        recorded = agent_a.record_error("web_fetch", "HTTP 403 Forbidden from cloudflare",
                                        "send a browser User-Agent header", cause="bot protection",
                                        keywords=["cloudflare"], session_id="session-a")
        assert recorded.stored and not recorded.refreshed and recorded.detail
        record = recorded.record
        assert record.outcome == "resolved" and record.session_id == "session-a"
        assert list(record.keywords) == ["cloudflare", "error_type:permission"]
        assert record.expires_at_unix_nano == record.last_hit_unix_nano + 90 * DAY_NANOS

        found = agent_b.lookup_errors("web_fetch", "GET https://example.test failed: HTTP 403 Forbidden")
        assert [r.id for r in found.records] == [record.id]
        assert found.records[0].session_id == "session-a" and found.records[0].hit_count == 1
        assert found.related_errors.splitlines() == [
            ("related_errors: 1 earlier lesson(s) for tool web_fetch, best first. "
             "Apply a fix only if it fits this failure."),
            "1. [permission] symptom: HTTP 403 Forbidden from cloudflare",
            "   cause: bot protection",
            "   fix: send a browser User-Agent header",
        ]
        assert agent_b.lookup_errors("other_tool", "HTTP 403 Forbidden").records == []


def test_the_configured_embedder_relates_lessons_that_share_no_word(server, lessons_backend):
    with server.client() as client:
        record = client.record_error("notify", "webhooks undelivered", "re-register the endpoint").record
        client.record_error("notify", "SMTP relay refused", "use the authenticated relay")
        # "webhook" is not "webhooks": only the built-in embedder's character n-grams relate them
        assert [r.id for r in client.lookup_errors("notify", "webhook undelivered").records] == [record.id]
    assert set(lessons_backend.column("vector_model")) == {"builtin-v1"}


@pytest.mark.parametrize("outcome", ["failed", "abandoned"])
def test_failed_and_abandoned_outcomes_are_discarded_and_the_reply_says_so(client, outcome):
    reply = client.record_error("shell", "rm: permission denied", "", outcome=outcome, session_id="s1")
    assert not reply.stored and reply.record is None
    assert "only resolved" in reply.detail
    assert client.list_errors().records == []
    assert client.lookup_errors("shell", "rm: permission denied").records == []


def test_a_repeated_lesson_refreshes_instead_of_duplicating(client):
    first = client.record_error("db", "deadlock detected in txn 8c1f2a9e7b", "retry the transaction",
                                session_id="s1").record
    again = client.record_error("db", "Deadlock detected in txn 77aa00ff11  ", "retry with backoff",
                                keywords=["deadlock"], session_id="s2")
    assert again.stored and again.refreshed
    assert again.record.id == first.id and again.record.session_id == "s1"
    assert again.record.hit_count == 1 and again.record.action == "retry with backoff"
    assert again.record.created_at_unix_nano == first.created_at_unix_nano
    assert again.record.expires_at_unix_nano >= first.expires_at_unix_nano
    assert [r.id for r in client.list_errors().records] == [first.id]


def test_lookup_returns_at_most_limit_best_first(client):
    for number in range(5):
        client.record_error("api", f"rate limit exceeded for key k{number}", "wait and retry", keywords=["rate limit"])
    exact = client.record_error("api", "rate limit exceeded: 429 Too Many Requests", "honour Retry-After").record
    client.record_error("api", "certificate verify failed", "update the CA bundle")
    found = client.lookup_errors("api", "HTTP error: rate limit exceeded: 429 Too Many Requests")
    assert len(found.records) == 3 and found.records[0].id == exact.id
    assert "certificate" not in found.related_errors
    assert len(client.lookup_errors("api", "rate limit exceeded", limit=10).records) == 6


def test_lookup_refreshes_the_ttl_and_unhit_lessons_expire(server, lessons_backend):
    with server.client() as client:
        kept = client.record_error("web_fetch", "connection timed out", "raise the timeout to 60s").record
        dropped = client.record_error("web_fetch", "TLS handshake failure", "pin TLS 1.2").record
    moved(server, 60)
    with server.client() as client:
        hit = client.lookup_errors("web_fetch", "connect: connection timed out").records
        assert [r.id for r in hit] == [kept.id]
        assert hit[0].last_hit_unix_nano >= kept.created_at_unix_nano + 60 * DAY_NANOS
        assert hit[0].expires_at_unix_nano == hit[0].last_hit_unix_nano + 90 * DAY_NANOS
        assert {r.id for r in all_records(client)} == {kept.id, dropped.id}
    moved(server, 91)  # past dropped's expiry, well inside kept's refreshed one
    with server.client() as client:
        assert [r.id for r in all_records(client)] == [kept.id]
        assert client.lookup_errors("web_fetch", "TLS handshake failure").records == []
        assert client.search_errors("TLS").records == []
        rejected(lambda: client.update_error_action(dropped.id, "x"), grpc.StatusCode.NOT_FOUND,
                 "ERROR_RECORD_NOT_FOUND")
    moved(server, 60 + 91)  # 91 days after the hit: kept expires too
    with server.client() as client:
        assert all_records(client) == []
        assert client.lookup_errors("web_fetch", "connection timed out").records == []
    assert lessons_backend.column("count(*)") == [0]  # purged, not just hidden


def test_error_ttl_days_is_a_setting(make_server):
    server = make_server("--error-ttl-days", "7")
    with server.client() as client:
        record = client.record_error("t", "boom", "fix").record
        assert record.expires_at_unix_nano == record.last_hit_unix_nano + 7 * DAY_NANOS
    moved(server, 8)
    with server.client() as client:
        assert client.list_errors().records == []


def test_update_rewrites_the_action_and_keeps_the_ttl(server):
    with server.client() as client:
        record = client.record_error("git", "rejected: non-fast-forward", "git pull --rebase").record
    moved(server, 30)
    with server.client() as client:
        updated = client.update_error_action(record.id, "fetch, rebase, then push").record
        assert updated.action == "fetch, rebase, then push"
        assert (updated.last_hit_unix_nano, updated.expires_at_unix_nano, updated.hit_count) == (
            record.last_hit_unix_nano, record.expires_at_unix_nano, 0)
        found = client.lookup_errors("git", "! [rejected] main -> main (non-fast-forward)")
        assert "fix: fetch, rebase, then push" in found.related_errors


def test_delete_removes_the_lesson_and_unknown_ids_are_not_found(client):
    record = client.record_error("git", "rejected: non-fast-forward", "git pull --rebase").record
    assert client.delete_error(record.id).record.id == record.id
    assert client.list_errors().records == []
    assert client.lookup_errors("git", "rejected: non-fast-forward").records == []
    for call in (lambda: client.delete_error(record.id), lambda: client.update_error_action(record.id, "x"),
                 lambda: client.delete_error("0" * 32)):
        rejected(call, grpc.StatusCode.NOT_FOUND, "ERROR_RECORD_NOT_FOUND")


def test_search_spans_tools(client):
    a = client.record_error("web_fetch", "proxy returned 502", "retry through the backup proxy").record
    b = client.record_error("shell", "pip install failed behind the proxy", "set HTTPS_PROXY").record
    client.record_error("shell", "disk full", "clean /tmp")
    found = client.search_errors("PROXY").records
    assert {r.id for r in found} == {a.id, b.id}
    assert len(client.search_errors("proxy", limit=1).records) == 1


def test_list_pages_newest_first_and_filters_by_tool(client):
    ids = [client.record_error("even" if n % 2 == 0 else "odd", f"symptom {n}", "fix").record.id for n in range(16)]
    assert [r.id for r in all_records(client)] == ids[::-1]
    assert [r.id for r in all_records(client, tool_name="odd")] == ids[1::2][::-1]
    first = client.list_errors(page_size=5)
    assert len(first.records) == 5 and first.next_page_token
    rejected(lambda: client.list_errors(page_token="not-a-token"), grpc.StatusCode.INVALID_ARGUMENT,
             "INVALID_PAGE_TOKEN")


@pytest.mark.parametrize("request_fields, reason", [
    ({"tool_name": "", "symptom": "s", "action": "a", "outcome": "resolved"}, "TOOL_NAME_REQUIRED"),
    ({"tool_name": "t", "symptom": "", "action": "a", "outcome": "resolved"}, "SYMPTOM_REQUIRED"),
    ({"tool_name": "t", "symptom": "s", "action": "", "outcome": "resolved"}, "ACTION_REQUIRED"),
    ({"tool_name": "t", "symptom": "s", "action": "a"}, "OUTCOME_REQUIRED"),
    ({"tool_name": "t", "symptom": "s", "action": "a", "outcome": 9}, "INVALID_ENUM"),
    ({"tool_name": "t", "symptom": "s" * 20000, "action": "a", "outcome": "resolved"}, "FIELD_TOO_LARGE"),
    ({"tool_name": "t", "symptom": "s", "action": "a", "outcome": "resolved", "session_id": "x" * 257},
     "INVALID_SESSION_ID"),
])
def test_bad_records_get_invalid_argument_and_store_nothing(client, request_fields, reason):
    rejected(lambda: client.record_error(**{"outcome": "", **request_fields}), grpc.StatusCode.INVALID_ARGUMENT,
             reason)
    assert client.list_errors().records == []


def test_bad_queries_get_invalid_argument(client):
    rejected(lambda: client.lookup_errors("", "x"), grpc.StatusCode.INVALID_ARGUMENT, "TOOL_NAME_REQUIRED")
    rejected(lambda: client.search_errors(""), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY")
    rejected(lambda: client.update_error_action("", "x"), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_ID_REQUIRED")
    record = client.record_error("t", "boom", "fix").record
    rejected(lambda: client.update_error_action(record.id, ""), grpc.StatusCode.INVALID_ARGUMENT, "ACTION_REQUIRED")
    assert client.list_errors().records[0].action == "fix"


@pytest.mark.as_process
def test_sigkill_right_after_acknowledged_records_loses_none(make_server):
    server = make_server()

    def record(client, worker: int, sequence: int) -> str:
        return client.record_error(f"tool{worker}", f"failure {worker}-{sequence}", "the fix").record.id

    acknowledged = kill_during_burst(server, record, workers=4, until=200)
    server.start()
    with server.client() as client:
        stored = {record.id for record in all_records(client)}
    assert set(acknowledged) <= stored
