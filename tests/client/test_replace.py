"""ReplaceMessages through the Python clients on a real server: the whole history replaced in every
store (history.json, the archive, the summary), a concurrent writer detected by the newest id the
caller read, a retry under one key done once, and bad input refused with its reason."""

from __future__ import annotations

import asyncio

import pytest

from memsvc_client import AsyncClient, MemsvcError
from tests.support import wait_for
from tests.support.llm_server import summary_reply

pytestmark = pytest.mark.in_process


def contents(client, session_id: str) -> list[str]:
    return [message.content for message in client.list_messages(session_id).messages]


def keyword_hits(client, session_id: str, word: str) -> list[str]:
    return [hit.message.content for hit in client.search(session_id, word, match="keyword", limit=32).hits]


def test_the_whole_history_is_replaced_in_every_store(make_server, llm_server):
    llm_server.script("sum", summary_reply(["Do: talk about apples"]))
    server = make_server("--max-history-messages", "2", "--llm-base-url", llm_server.base_url,
                         "--summary-model", "sum", "--llm-max-retries", "0")
    with server.client() as client:
        for turn in range(4):
            client.append("fruit", [("user", f"apples {turn}"), ("assistant", "noted")])
        assert client.compact("fruit").removed > 0  # some of the old history only in the archive
        assert client.summarize("fruit", timeout=30).summary is not None
        wait_for(lambda: len(keyword_hits(client, "fruit", "apples")) == 4)

        reply = client.replace_messages("fruit", [("system", "be brief"), ("user", "pears please")])
        assert [message.id for message in reply.messages] == [9, 10], "ids are never reused"
        assert not reply.replayed
        assert reply.deleted.history_messages + reply.deleted.archived_messages >= 8
        assert reply.deleted.summary

        assert contents(client, "fruit") == ["be brief", "pears please"]
        assert [m.content for m in client.get_context("fruit").window] == ["be brief", "pears please"]
        assert client.get_summary("fruit").summary is None
        wait_for(lambda: keyword_hits(client, "fruit", "pears") == ["pears please"])
        assert keyword_hits(client, "fruit", "apples") == []
        assert client.append("fruit", [("assistant", "pears it is")]).messages[0].id == 11


def test_an_expected_last_id_detects_another_writer(client):
    first = client.append("shared-doc", [("user", "one"), ("assistant", "two")]).messages
    assert client.replace_messages("shared-doc", [("user", "three")], expected_last_id=first[-1].id).messages[0].id == 3
    client.append("shared-doc", [("user", "another writer")])
    with pytest.raises(MemsvcError) as refused:
        client.replace_messages("shared-doc", [("user", "stale")], expected_last_id=3)
    assert (refused.value.code.name, refused.value.reason) == ("FAILED_PRECONDITION", "HISTORY_CHANGED")
    assert contents(client, "shared-doc") == ["three", "another writer"]

    client.delete_messages("shared-doc", [4])  # the newest deleted: 3 is the newest again
    client.replace_messages("shared-doc", [("user", "five")], expected_last_id=3)
    with pytest.raises(MemsvcError, match="HISTORY_CHANGED"):
        client.replace_messages("new-doc", [("user", "x")], expected_last_id=7)
    assert client.replace_messages("new-doc", [("user", "x")], expected_last_id=0).messages[0].id == 1
    with pytest.raises(MemsvcError, match="HISTORY_CHANGED"):
        client.replace_messages("new-doc", [("user", "y")], expected_last_id=0)


def test_a_session_whose_history_was_compacted_away_expects_its_archived_newest(make_server):
    server = make_server("--max-history-messages", "2")
    with server.client() as client:
        client.append("archived", [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")])
        client.compact("archived")
        client.delete_messages("archived", [3, 4])  # history.json now holds none; the archive holds 1 and 2
        with pytest.raises(MemsvcError, match="HISTORY_CHANGED"):
            client.replace_messages("archived", [("user", "new")], expected_last_id=0)
        client.replace_messages("archived", [("user", "new")], expected_last_id=2)
        assert contents(client, "archived") == ["new"]


def test_a_retry_under_one_key_replaces_once(client):
    client.append("retried", [("user", "before")])
    first = client.replace_messages("retried", [("user", "after")], idempotency_key="k1", expected_last_id=1)
    again = client.replace_messages("retried", [("user", "after")], idempotency_key="k1", expected_last_id=1)
    assert again.replayed and [m.id for m in again.messages] == [m.id for m in first.messages] == [2]
    assert contents(client, "retried") == ["after"]


def test_an_empty_history_leaves_the_session_without_messages(client):
    client.append("emptied", [("user", "gone soon")])
    assert client.replace_messages("emptied", []).deleted.history_messages == 1
    assert contents(client, "emptied") == []
    assert client.append("emptied", [("user", "next")]).messages[0].id == 2
    client.replace_messages("never-written", [])
    assert "never-written" not in [info.session_id for info in client.list_sessions().sessions]


def test_bad_input_is_refused_before_anything_changes(client):
    client.append("kept", [("user", "still here")])
    for messages, reason in [([{"role": "", "content": "x"}], "INVALID_ROLE"),
                             ([("user", "x"), ("user", " ")], "EMPTY_CONTENT"),
                             ([{"role": "user", "content": "x", "payload_json": "{"}], "INVALID_PAYLOAD"),
                             ([{"role": "user", "content": "x", "embedding": [0.5] * 8}], "EMBEDDINGS_IN_REPLACE")]:
        with pytest.raises(MemsvcError) as refused:
            client.replace_messages("kept", messages)
        assert (refused.value.code.name, refused.value.reason) == ("INVALID_ARGUMENT", reason)
    assert contents(client, "kept") == ["still here"]


def test_the_asyncio_client_replaces_too(server):
    async def scenario() -> list[str]:
        async with AsyncClient(server.tcp) as memory:
            await memory.append("async-doc", [("user", "old")])
            await memory.replace_messages("async-doc", [("user", "new")], expected_last_id=1)
            return [m.content for m in (await memory.list_messages("async-doc")).messages]

    assert asyncio.run(scenario()) == ["new"]
