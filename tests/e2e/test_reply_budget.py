"""No read fails for the size of what is stored (issue 24 items 8 and 11), through a real server.

Each reply that carries stored messages keeps within max_reply_bytes, under a default client's
4 MiB receive limit: "default client" here is a bare grpcio channel with no options at all,
as any generated stub in any language would open. A reply over budget leaves out the oldest
(GetContext, DeleteMessages' texts) or lowest-ranked (Search) messages and says how many; a page of
ListMessages ends early; one message too large alone is named in a FAILED_PRECONDITION.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

from memsvc_client import Client, FailedPreconditionError
from memsvc_client.transcript import every_message
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc, shards_pb2, shards_pb2_grpc
from tests.support import curl

pytestmark = pytest.mark.in_process

DEFAULT_RECEIVE = 4 * 1024 * 1024
"grpcio's default max_receive_message_length, the one every stub without options has."
KB = 1000


def tool_payload(number: int, size: int) -> str:
    return json.dumps({"type": "tool", "tool_call_id": f"call_{number}", "output": "r" * size})


def bare_stub(server) -> Iterator[memory_pb2_grpc.MemoryServiceStub]:
    with grpc.insecure_channel(server.tcp) as channel:  # no options: a 4 MiB receive limit
        yield memory_pb2_grpc.MemoryServiceStub(channel)


def append_one_by_one(client: Client, session_id: str, messages: list[dict]) -> None:
    for message in messages:  # each Append stays under max_request_bytes
        client.append(session_id, [message])


def test_a_window_of_seven_large_tool_results_reads_with_a_default_client(make_server):
    server = make_server()
    with server.client(timeout=60) as client:
        append_one_by_one(client, "tools", [{"role": "tool", "content": f"result {n}",
                                             "payload_json": tool_payload(n, 700 * KB)} for n in range(1, 8)])
    for stub in bare_stub(server):
        reply = stub.GetContext(pb.GetContextRequest(session_id="tools"), timeout=60)
        assert reply.ByteSize() <= DEFAULT_RECEIVE
        shown = [message.id for message in reply.window]
        assert shown == list(range(8 - len(shown), 8)) and reply.omitted_messages == 7 - len(shown) > 0
        assert [json.loads(message.payload_json)["tool_call_id"] for message in reply.window] == [
            f"call_{n}" for n in shown]
        older = stub.ListMessages(pb.ListMessagesRequest(session_id="tools", newest_first=True,
                                                         page_token=reply.older_page_token), timeout=60)
        assert [message.id for message in older.messages] == list(range(1, shown[0]))
        light = stub.GetContext(pb.GetContextRequest(session_id="tools", omit_payloads=True), timeout=60)
        assert [message.id for message in light.window] == list(range(1, 8)) and light.omitted_messages == 0
        assert {message.payload_json for message in light.window} == {""}
        assert light.window[0].content == "result 1"
    with server.client(timeout=60) as client:  # the memsvc client sees the same marker
        context = client.get_context("tools")
        assert context.omitted_messages == 7 - len(context.window) > 0


def test_a_window_of_sixteen_one_megabyte_messages_comes_newest_first_and_the_rest_by_pages(make_server):
    server = make_server("--max-history-bytes", str(64 * 1024 * 1024))
    sent = [{"role": "user" if n % 2 else "assistant", "content": f"{n:02d}" + "m" * (1024 * 1024 - 2)}
            for n in range(1, 17)]
    with server.client(timeout=120) as client:
        append_one_by_one(client, "big", sent)
        context = client.get_context("big")
        ids = [message.id for message in context.window]
        assert ids == list(range(17 - len(ids), 17)) and context.omitted_messages == 16 - len(ids) > 0
        assert sum(len(message.content) for message in context.window) <= DEFAULT_RECEIVE
        assert [message.content for message in every_message(client, "big")] == [m["content"] for m in sent]
    for stub in bare_stub(server):
        reply = stub.GetContext(pb.GetContextRequest(session_id="big"), timeout=120)
        assert [message.id for message in reply.window] == ids


def test_one_message_larger_than_the_budget_is_named_and_reads_without_its_payload(make_server):
    server = make_server("--max-reply-bytes", str(1200 * KB))
    with server.client(timeout=60) as client:
        client.append("one", [{"role": "user", "content": "small"}])
        client.append("one", [{"role": "tool", "content": "c" * 700 * KB, "payload_json": tool_payload(2, 700 * KB)}])
        first = client.list_messages("one")  # a page ends before the message that does not fit
        assert [m.id for m in first.messages] == [1] and first.next_page_token
        for read in (lambda: client.get_context("one"), lambda: client.list_messages("one", page_token="1")):
            with pytest.raises(FailedPreconditionError) as refused:
                read()
            assert refused.value.reason == "MESSAGE_TOO_LARGE_FOR_REPLY"
            assert refused.value.metadata["message_id"] == "2" and "omit_payloads" in refused.value.message
        window = client.get_context("one", omit_payloads=True).window
        assert [(m.id, len(m.content), m.payload_json) for m in window] == [(1, 5, ""), (2, 700 * KB, "")]
        assert len(client.list_messages("one", omit_payloads=True).messages) == 2
        # A run too large as a whole comes as its best match alone: the neighbour is what was left out.
        found = client.search("one", "small", match="keyword", with_context=True)
        assert [(hit.message.id, hit.run) for hit in found.hits] == [(1, 1)] and found.omitted_hits == 1


def test_http_json_callers_get_the_same_budget_and_markers(make_server):
    server = make_server("--http-listen", "127.0.0.1:0", "--max-reply-bytes", str(1200 * KB))
    with server.client(timeout=60) as client:
        append_one_by_one(client, "web", [{"role": "tool", "content": f"result {n}",
                                           "payload_json": tool_payload(n, 500 * KB)} for n in range(1, 4)])
    reply = curl.post(f"http://{server.http}", "MemoryService/GetContext", {"sessionId": "web"})
    assert reply.status == 200
    assert [m["id"] for m in reply.body["window"]] == ["2", "3"]
    assert reply.body["omittedMessages"] == 1 and reply.body["olderPageToken"] == "2"
    light = curl.post(f"http://{server.http}", "MemoryService/GetContext", {"sessionId": "web", "omitPayloads": True})
    assert len(light.body["window"]) == 3 and "omittedMessages" not in light.body


def test_list_messages_pages_by_bytes_and_without_payloads_takes_more_per_page(make_server):
    server = make_server()
    with server.client(timeout=60) as client:
        append_one_by_one(client, "pages", [{"role": "tool", "content": f"out {n}",
                                             "payload_json": tool_payload(n, 900 * KB)} for n in range(1, 11)])
    for stub in bare_stub(server):
        pages, token = [], ""
        while True:
            page = stub.ListMessages(pb.ListMessagesRequest(session_id="pages", page_token=token), timeout=60)
            assert page.ByteSize() <= DEFAULT_RECEIVE
            pages.append([message.id for message in page.messages])
            if not (token := page.next_page_token):
                break
        assert [n for page in pages for n in page] == list(range(1, 11)) and max(map(len, pages)) == 4
        light = stub.ListMessages(pb.ListMessagesRequest(session_id="pages", omit_payloads=True), timeout=60)
        assert len(light.messages) == 10 and not light.next_page_token


def test_search_leaves_out_the_lowest_ranked_hits_that_do_not_fit(make_server):
    server = make_server("--max-history-messages", "4")
    with server.client(timeout=60) as client:
        append_one_by_one(client, "found", [{"role": "user", "content": f"needle {'needle ' * (n % 5)} {n}",
                                             "payload_json": tool_payload(n, 400 * KB)} for n in range(1, 33)])
    for stub in bare_stub(server):
        request = pb.SearchRequest(session_id="found", query="needle", match=pb.MATCH_KEYWORD, limit=32)
        ranked = stub.Search(pb.SearchRequest(session_id="found", query="needle", match=pb.MATCH_KEYWORD,
                                              limit=32, omit_payloads=True), timeout=60)
        assert len(ranked.hits) == 32 and ranked.omitted_hits == 0
        reply = stub.Search(request, timeout=60)
        assert reply.ByteSize() <= DEFAULT_RECEIVE and 0 < len(reply.hits) < 32
        assert reply.omitted_hits == 32 - len(reply.hits)
        assert [hit.message.id for hit in reply.hits] == [hit.message.id for hit in ranked.hits][:len(reply.hits)]
        semantic = stub.Search(pb.SearchRequest(session_id="found", query="needle", limit=32, include_window=True),
                               timeout=60)
        assert semantic.ByteSize() <= DEFAULT_RECEIVE and semantic.omitted_hits > 0
        assert sorted({hit.run for hit in semantic.hits}) == list(range(1, max(hit.run for hit in semantic.hits) + 1))


def test_delete_messages_echoes_every_deleted_message_within_the_budget(make_server):
    server = make_server()
    with server.client(timeout=60) as client:
        append_one_by_one(client, "gone", [{"role": "tool", "content": f"result {n}",
                                            "payload_json": tool_payload(n, 700 * KB)} for n in range(1, 8)])
    for stub in bare_stub(server):
        reply = stub.DeleteMessages(pb.DeleteMessagesRequest(session_id="gone", last=7), timeout=60)
        assert reply.ByteSize() <= DEFAULT_RECEIVE and reply.deleted.history_messages == 7
        assert [message.id for message in reply.messages] == list(range(1, 8))
        assert 0 < reply.contents_omitted < 7
        whole = reply.messages[reply.contents_omitted:]
        assert {m.content for m in reply.messages[:reply.contents_omitted]} == {""}
        assert [json.loads(m.payload_json)["tool_call_id"] for m in whole] == [f"call_{m.id}" for m in whole]


def test_an_export_comes_in_parts_a_default_client_receives(make_server):
    server = make_server()
    with server.client(timeout=60) as client:
        append_one_by_one(client, "moving", [{"role": "tool", "content": f"result {n}",
                                              "payload_json": tool_payload(n, 700 * KB)} for n in range(1, 8)])
    with grpc.insecure_channel(server.tcp) as channel:  # no options: a 4 MiB receive limit
        parts = list(shards_pb2_grpc.ShardServiceStub(channel).ExportSession(
            shards_pb2.ExportSessionRequest(session_id="moving"), timeout=60,
            metadata=[("memsvc-session", "moving")]))
    assert max(part.ByteSize() for part in parts) <= DEFAULT_RECEIVE
    assert [m.message.id for part in parts for m in part.messages] == list(range(1, 8))
    assert parts[-1].end.messages == 7


def test_replies_are_never_refused_for_their_size_under_a_small_request_limit(make_server):
    # Item 11's class: the send limit once followed max_request_bytes, so a small request limit refused the
    # replies of reads ("Sent message larger than max") once a session held enough small messages.
    server = make_server("--max-request-bytes", "16384", "--max-history-messages", "8000")
    with server.client(timeout=60) as client:
        for _ in range(8):
            assert len(client.append("tiny", [{"role": "user", "content": "x"}] * 1000).messages) == 1000
        assert len(client.get_context("tiny").window) == 8000
        assert len(client.list_messages("tiny", page_size=1000).messages) == 1000
        assert len(client.delete_messages("tiny", last=1000).messages) == 1000


def test_fit_context_leaves_an_unchanged_run_too_large_for_a_reply_out(make_server):
    server = make_server("--max-reply-bytes", str(1200 * KB))
    run = [{"role": "system", "content": "Be brief."},
           {"role": "tool", "tool_call_id": "call_1", "content": "row " * (175 * KB)},
           {"role": "user", "content": "word " * (140 * KB)}]
    with server.client(timeout=120) as client:
        reply = client.fit_context("fit", "acme", "rocket-9", run, context_window=2_000_000)
        assert reply.fits and not reply.changed and reply.messages_omitted and reply.messages == []
        small = client.fit_context("fit", "acme", "rocket-9", run[:1] + run[2:], context_window=2_000_000)
        assert not small.messages_omitted and [json.loads(m)["role"] for m in small.messages] == ["system", "user"]
