"""Roles, payloads, ListMessages and DeleteMessages through a real server: what a framework
adapter stores comes back exactly, and a deleted message is gone from every tier."""

from __future__ import annotations

import json

import grpc
import pytest

from memsvc_client import Client, InvalidArgumentError, MemsvcError, NotFoundError
from tests.support import wait_for
from tests.support.archives import numbered, old_index

pytestmark = pytest.mark.in_process

# Whitespace, key order, escapes and numbers exactly as a framework wrote them.
PAYLOAD = '{"type": "ai",\n "data": {"tool_calls": [{"id": "call_7", "args": {"city": "Z\\u00fcrich"}}], "n": 1.50}}'


def every_message(client: Client, session_id: str, page_size: int = 0) -> list:
    messages, token = [], ""
    while True:
        page = client.list_messages(session_id, page_size=page_size, page_token=token)
        messages += page.messages
        if not (token := page.next_page_token):
            return messages


def keyword_hits(client: Client, session_id: str, word: str) -> list[str]:
    return [hit.message.content for hit in client.search(session_id, word, match="keyword", limit=32).hits]


def nearest(client: Client, session_id: str, text: str) -> list[str]:
    """The best semantic match, window included: a deleted message's vector would come first."""
    hits = client.search(session_id, text, match="semantic", limit=1, include_window=True).hits
    return [hit.message.content for hit in hits if not hit.is_context]


def test_roles_and_payloads_come_back_exactly_from_every_read(make_server):
    server = make_server("--max-history-messages", "2")
    sent = [{"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "What is the weather in Zurich?", "payload_json": '{"id": "u1"}'},
            {"role": "assistant", "content": "get_weather(Zurich)", "payload_json": PAYLOAD},
            {"role": "tool", "content": "sunny, 21 degrees", "payload_json": '["sunny", 21]'},
            {"role": "assistant", "content": "Il fait beau a Zurich.", "sender": "bot"}]
    with server.client() as client:
        acknowledged = client.append("s", sent).messages
        assert [m.role for m in acknowledged] == [m["role"] for m in sent]
        assert all(m.content == "" and m.payload_json == "" for m in acknowledged), "the reply stays small"
        stored = every_message(client, "s")
        assert [(m.role, m.content, m.payload_json) for m in stored] == [
            (m["role"], m["content"], m.get("payload_json", "")) for m in sent]
        assert [m.payload_json for m in client.get_context("s").window] == ['["sunny", 21]', ""]
        hit = client.search("s", "get_weather", match="keyword").hits[0].message
        assert (hit.role, hit.payload_json) == ("assistant", PAYLOAD)
        assert keyword_hits(client, "s", "call_7") == [], "the payload is never searched"
        assert client.compact("s").removed == 0, "no cut between the tool call (3) and its result (4)"
        stored += client.append("s", [("user", "Merci"), ("assistant", "De rien")]).messages
        assert client.compact("s").removed == 5
        archived = client.search("s", "get_weather", match="keyword").hits[0]
        assert (archived.source, archived.message.payload_json) == ("archive", PAYLOAD)
        # (the Append reply left contents out: compare what the server read back)
        stored = stored[:5] + every_message(client, "s")[5:]
        assert every_message(client, "s")[:5] == stored[:5]
    server.restart()
    with server.client() as client:
        assert every_message(client, "s", page_size=2) == stored


def test_delete_messages_takes_them_from_history_archive_and_vectors(make_server):
    server = make_server("--max-history-messages", "2")
    with server.client() as client:
        for topic in ("quasar telescope", "glacier hiking", "volcano tour", "sourdough recipe"):
            client.append("s", [("user", f"tell me about the {topic}"), ("assistant", f"the {topic} is lovely")])
        assert client.compact("s").removed == 6  # the first three topics now live in the archive only
        wait_for(lambda: client.search("s", "sourdough", match="semantic", include_window=True).unsearched == 0)
        assert nearest(client, "s", "tell me about the sourdough recipe") == ["tell me about the sourdough recipe"]

        popped = client.delete_messages("s", last=1)
        assert [m.content for m in popped.messages] == ["the sourdough recipe is lovely"]
        assert (popped.deleted.history_messages, popped.deleted.archived_messages, popped.deleted.vectors) == (1, 1, 1)
        by_id = client.delete_messages("s", [1, 7, 1000])  # one archived only, one in history.json, one unknown
        assert [m.content for m in by_id.messages] == ["tell me about the quasar telescope",
                                                       "tell me about the sourdough recipe"]
        assert by_id.deleted.archived_messages == 2 and by_id.deleted.history_messages == 1

        assert [m.id for m in every_message(client, "s")] == [2, 3, 4, 5, 6]
        assert client.get_context("s").window == []
        assert keyword_hits(client, "s", "quasar") == ["the quasar telescope is lovely"]
        assert keyword_hits(client, "s", "sourdough") == []
        assert nearest(client, "s", "tell me about the sourdough recipe") != ["tell me about the sourdough recipe"]
        assert client.append("s", [("user", "next")]).messages[0].id == 9, "ids are never given again"
        again = client.delete_messages("s", [1, 7])
        assert again.messages == [] and again.deleted.archived_messages == 0
    server.restart()
    with server.client() as client:
        assert [m.id for m in every_message(client, "s")] == [2, 3, 4, 5, 6, 9]
        assert keyword_hits(client, "s", "sourdough") == []
        assert nearest(client, "s", "tell me about the sourdough recipe") != ["tell me about the sourdough recipe"]


@pytest.mark.parametrize(("call", "code", "reason"), [
    (lambda c: c.delete_messages("s"), grpc.StatusCode.INVALID_ARGUMENT, "DELETE_TARGET_REQUIRED"),
    (lambda c: c.delete_messages("s", [1], last=1), grpc.StatusCode.INVALID_ARGUMENT, "DELETE_TARGET_AMBIGUOUS"),
    (lambda c: c.delete_messages("s", last=5000), grpc.StatusCode.INVALID_ARGUMENT, "TOO_MANY_MESSAGES"),
    (lambda c: c.delete_messages("ghost", last=1), grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND"),
    (lambda c: c.delete_messages("..", last=1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SESSION_ID"),
    (lambda c: c.list_messages("s", page_token="x"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN"),
    (lambda c: c.append("s", [{"role": "tool", "content": "x", "payload_json": "{oops"}]),
     grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAYLOAD"),
    (lambda c: c.append("s", [{"role": "tool", "content": "x", "payload_json": json.dumps("p" * 2000)}]),
     grpc.StatusCode.INVALID_ARGUMENT, "PAYLOAD_TOO_LARGE"),
    (lambda c: c.append("s", [{"role": 9, "content": "x"}]), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ROLE"),
])
def test_bad_requests_are_refused_with_a_reason_and_change_nothing(make_server, call, code, reason):
    server = make_server("--max-message-bytes", "1000")
    with server.client() as client:
        client.append("s", [("user", "kept"), ("assistant", "also kept")])
        with pytest.raises(MemsvcError) as refused:
            call(client)
        assert (refused.value.code, refused.value.reason) == (code, reason)
        assert [m.content for m in every_message(client, "s")] == ["kept", "also kept"]


def test_list_messages_of_a_session_never_written_is_empty(client):
    assert client.list_messages("nobody").messages == []
    with pytest.raises(NotFoundError):
        client.delete_messages("nobody", [1])
    with pytest.raises(InvalidArgumentError):
        client.list_messages("bad\x00id")


def test_an_existing_data_directory_keeps_working(make_server, data_dir):
    """Records without payload, roles user and assistant, and an archive in the first index format."""
    history = data_dir / "sessions" / "old" / "history.json"
    history.parent.mkdir(parents=True)
    history.write_text('[\n{"id":5,"role":"user","content":"recent question","sendAt":5}\n'
                       ',{"id":6,"role":"assistant","content":"recent answer","sendAt":6}\n]\n')
    old_index(data_dir / ".store", 1, {"old": numbered(4, "compacted glacier note {n}")})
    server = make_server()
    with server.client() as client:
        assert [(m.id, m.role, m.payload_json) for m in every_message(client, "old")] == [
            (1, "user", ""), (2, "assistant", ""), (3, "user", ""), (4, "assistant", ""),
            (5, "user", ""), (6, "assistant", "")]
        assert len(keyword_hits(client, "old", "glacier")) == 4
        client.append("old", [{"role": "tool", "content": "new", "payload_json": "{}"}])
        assert [m.content for m in client.delete_messages("old", [2, 7]).messages] == [
            "compacted glacier note 2", "new"]
        assert [m.id for m in every_message(client, "old")] == [1, 3, 4, 5, 6]
