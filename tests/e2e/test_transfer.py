"""Export, import and holds over gRPC between real servers: what the wire says (codes, reasons,
routing of a stream), an export its reader abandons, an undecodable part, and (between server
processes) an import a kill -9 interrupts, undone at the next start."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from memsvc_client import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from memsvc_client.rpcs import RPCS
from tests.support import ServerProcess

pytestmark = pytest.mark.in_process


def fill(server: ServerProcess, session: str, pairs: int) -> None:
    with server.client() as client:
        for index in range(0, pairs, 500):
            batch = []
            for number in range(index, min(index + 500, pairs)):
                batch += [("user", f"question {number}"), ("assistant", f"answer {number}")]
            client.append(session, batch)


def test_a_session_moves_between_servers_with_the_codes_the_contract_gives(make_server, tmp_path) -> None:
    first = make_server("--shard-name", "a", "--max-history-messages", "2")
    second = make_server("--shard-name", "b", directory=tmp_path / "second")
    fill(first, "s", 300)
    with first.client() as one, second.client() as two:
        one.compact("s")
        with pytest.raises(NotFoundError):
            list(one.export_session("nobody"))
        with pytest.raises(InvalidArgumentError):
            one.hold_session("..")
        with pytest.raises(FailedPreconditionError) as refused:
            one.release_session("s", drop=True)
        assert refused.value.reason == "SESSION_NOT_HELD"

        assert not two.hold_session("s").stored
        assert one.hold_session("s").stored
        info = one.get_server_info("s")
        assert (info.shard_name, info.session_stored, info.session_held, info.held_sessions) == ("a", True, True, 1)
        with pytest.raises(UnavailableError) as refused:
            one.get_context("s", timeout=2)
        assert refused.value.reason == "SESSION_MOVING"
        imported = two.import_session(one.export_session("s", page_size=100))
        assert (imported.session_id, imported.messages, imported.held) == ("s", 600, True)
        with pytest.raises(AlreadyExistsError) as refused:
            two.import_session(one.export_session("s"))
        assert refused.value.reason == "SESSION_EXISTS"
        assert two.release_session("s").was_held
        assert one.release_session("s", drop=True).deleted.archived_messages == 600
        assert [m.content for m in two.get_context("s").window] == ["question 299", "answer 299"]
        assert {hit.message.id for hit in two.search("s", "question 7", match="keyword", limit=32).hits} >= {15}
        assert not one.list_sessions().sessions and one.get_server_info().held_sessions == 0


def test_an_abandoned_export_lets_the_session_go(server: ServerProcess) -> None:
    fill(server, "s", 3000)
    with server.client() as client:
        parts = client.export_session("s", page_size=10)
        next(parts)
        next(parts)
        parts.close()  # the reader goes away mid-stream
        started = time.monotonic()
        assert client.reset("s", "all", timeout=10).deleted.history_messages == 6000
        assert time.monotonic() - started < 5, "the export's hold on the session ended with its stream"


def test_an_undecodable_part_of_an_import_is_invalid_argument(server: ServerProcess) -> None:
    rpc = RPCS["ImportSession"]
    with grpc.insecure_channel(server.tcp) as channel:
        send = channel.stream_unary(rpc.path, request_serializer=lambda raw: raw,
                                    response_deserializer=rpc.response.FromString)
        head = rpc.request(head={"session_id": "s", "next_id": 1}).SerializeToString()
        with pytest.raises(grpc.RpcError) as refused:
            send(iter([head, b"\xff\xff\xff"]), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with server.client() as client:
        assert not client.list_sessions().sessions and not client.get_server_info("s").session_held


def test_undecodable_requests_to_every_shard_rpc_are_invalid_argument(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.tcp) as channel:
        for rpc in RPCS.values():
            if not rpc.path.startswith("/memsvc.v1.ShardService/") or rpc.request_streaming:
                continue
            shape = channel.unary_stream if rpc.response_streaming else channel.unary_unary
            call = shape(rpc.path, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
            with pytest.raises(grpc.RpcError) as refused:
                reply = call(b"\x0a\x05ab", timeout=10)  # a field longer than the bytes that follow
                list(reply) if rpc.response_streaming else reply
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, rpc.name


@pytest.mark.as_process
def test_an_import_a_kill_interrupts_is_undone_at_the_next_start(make_server, tmp_path) -> None:
    source = make_server(directory=tmp_path / "source")
    fill(source, "big", 6000)  # 12,000 messages: the target commits archive rows before the kill
    with source.client() as client:
        parts = list(client.export_session("big", page_size=500))
    target = make_server(directory=tmp_path / "target")
    sent, killed = threading.Event(), threading.Event()

    def stalled() -> Iterator[object]:
        yield from parts[:-1]  # everything but the end part, which would store the session
        sent.set()
        killed.wait(60)

    failure: list[BaseException] = []

    def importing() -> None:
        try:
            with target.client() as client:
                client.import_session(stalled(), timeout=60)
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=importing)
    thread.start()
    assert sent.wait(60)
    time.sleep(1.5)  # the archive commits what arrived
    staging = [path.name for path in (target.data_dir / "sessions").iterdir() if path.name.startswith(".importing-")]
    assert staging == [".importing-big"]
    target.kill()
    killed.set()
    thread.join(60)
    assert failure and isinstance(failure[0], UnavailableError)
    target.start()
    with target.client() as client:
        assert not client.list_sessions().sessions
        assert not [path for path in (target.data_dir / "sessions").iterdir() if path.name.startswith(".")]
        client.append("big", [("user", "a new session that happens to be called big")])
        assert not client.search("big", "question", match="keyword").hits, "no archived row of the broken import"
        client.remove_session("big")
        assert client.import_session(parts).messages == 12_000
        assert client.search("big", "question 5999", match="keyword").hits


AGENT_TURN = [
    {"role": "system", "content": "You are the billing agent.", "send_at_unix_nano": 1_735_732_800_000_000_001},
    {"role": "user", "content": "what does invoice 7 say?", "sender": "ada"},
    {"role": "assistant", "content": "looking it up",
     "payload_json": '{"tool_calls": [{"id": "c1", "function": {"name": "invoice", "arguments": "{\\"n\\": 7}"}}]}'},
    {"role": "tool", "content": "invoice 7: 120 EUR", "payload_json": '{"tool_call_id": "c1"}'},
    {"role": "assistant", "content": "it says 120 EUR", "payload_json": '{"x": [1, 2.5e3, null, "\u00e9"]}'},
]


def listed(client, session: str) -> list[tuple[int, str, str, str, int, str]]:
    messages = client.list_messages(session, page_size=1000).messages
    return [(m.id, m.role, m.content, m.sender, m.send_at_unix_nano, m.payload_json) for m in messages]


@pytest.mark.as_process
def test_an_imported_session_is_exact_and_survives_a_kill_the_next_instant(make_server, tmp_path) -> None:
    """System and tool messages with payloads, archived and recent, some deleted, cross the wire
    exactly; the import is on disk when ImportSession returns, as an acknowledged Append is."""
    source = make_server("--max-history-messages", "2", directory=tmp_path / "source")
    target = make_server(directory=tmp_path / "target")
    with source.client() as one, target.client() as two:
        one.append("s", AGENT_TURN, idempotency_key="turn-1")
        one.append("s", AGENT_TURN, idempotency_key="turn-2")
        one.compact("s")
        one.delete_messages("s", [2, 4])
        one.delete_messages("s", last=1)
        before = listed(one, "s")
        assert [row[0] for row in before] == [1, 3, 5, 6, 7, 8, 9]
        assert {row[1] for row in before} == {"system", "user", "assistant", "tool"}
        two.append("s", [("user", "an earlier session called s")])  # its frames are in the target's journal
        two.remove_session("s")
        assert two.import_session(one.export_session("s", page_size=2)).messages == 7
    target.kill()
    target.start()
    with target.client() as two:
        assert listed(two, "s") == before, "deleted messages stay deleted; payloads and roles as they were"
        assert two.append("s", [("user", "and invoice 8?")]).messages[0].id == 11, "ids go on above the floor"
        assert two.append("s", AGENT_TURN[:1], idempotency_key="turn-2").messages[0].id == 6, "a retry is recognized"
