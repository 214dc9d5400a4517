"""Quotas and overload, end to end: sessions per server, messages per request, RPCs in flight."""

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import MemsvcError
from memsvc_client.v1 import memory_pb2 as pb
from tests.support import rss_mib

pytestmark = pytest.mark.in_process


def stored_sessions(server) -> list[str]:
    return sorted(path.name for path in (server.data_dir / "sessions").iterdir())


def quota_refusal(client, session_id: str) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(MemsvcError) as caught:
        client.append(session_id, [("user", "one too many")])
    return caught.value.code, caught.value.reason


def test_session_quota_refuses_new_sessions_and_keeps_existing_ones_working(make_server):
    server = make_server("--max-sessions", "2")
    with server.client() as client:
        client.append("a", [("user", "first")])
        client.append("b", [("user", "second")])
        assert quota_refusal(client, "c") == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SESSION_QUOTA_EXCEEDED")
        assert stored_sessions(server) == ["a", "b"]
        client.append("a", [("assistant", "still open")])
        assert [m.content for m in client.get_context("a").window] == ["first", "still open"]
        client.reset("b")  # a reset session keeps its place (its ids never repeat)
        assert quota_refusal(client, "c") == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SESSION_QUOTA_EXCEEDED")
        client.remove_session("b")
        client.append("c", [("user", "room again")])
        assert stored_sessions(server) == ["a", "c"]


def test_session_quota_counts_the_sessions_already_on_disk(make_server):
    server = make_server()
    with server.client() as client:
        for name in ("a", "b", "c"):
            client.append(name, [("user", name)])
    assert server.terminate() == 0
    smaller = make_server("--max-sessions", "2")
    with smaller.client() as client:
        assert quota_refusal(client, "d") == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SESSION_QUOTA_EXCEEDED")
        client.append("c", [("user", "existing sessions keep working")])
        client.remove_session("a")
        assert quota_refusal(client, "d") == (grpc.StatusCode.RESOURCE_EXHAUSTED, "SESSION_QUOTA_EXCEEDED")
        client.remove_session("b")
        client.append("d", [("user", "under the quota again")])
    assert stored_sessions(smaller) == ["c", "d"]


def test_concurrent_creations_never_exceed_the_session_quota(make_server):
    server = make_server("--max-sessions", "5")
    with server.client() as client, ThreadPoolExecutor(8) as pool:
        def create(index: int) -> str:
            try:
                client.append(f"s{index}", [("user", "hello")])
                return "OK"
            except MemsvcError as error:
                return error.reason
        outcomes = list(pool.map(create, range(24)))
    assert sorted(set(outcomes)) == ["OK", "SESSION_QUOTA_EXCEEDED"]
    assert outcomes.count("OK") == 5 == len(stored_sessions(server))


def test_too_many_messages_in_one_append_is_refused_whole(make_server):
    server = make_server("--max-messages-per-request", "3")
    with server.client() as client:
        client.append("s", [("user", "a"), ("assistant", "b"), ("user", "c")])
        with pytest.raises(MemsvcError) as caught:
            client.append("s", [("user", str(index)) for index in range(4)])
        assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "TOO_MANY_MESSAGES")
        assert [m.content for m in client.get_context("s").window] == ["a", "b", "c"]


def hold_streams(channel: grpc.Channel, count: int) -> list:
    """`count` health Watch calls, each held open (in flight) until cancelled."""
    stub = health_pb2_grpc.HealthStub(channel)
    streams = []
    for _ in range(count):
        stream = stub.Watch(health_pb2.HealthCheckRequest())
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING  # the server is running it
        streams.append(stream)
    return streams


def test_calls_past_max_concurrent_rpcs_are_shed_not_queued(make_server):
    server = make_server("--max-concurrent-rpcs", "3", "--health-listen", "127.0.0.1:0")
    with grpc.insecure_channel(server.tcp) as channel, server.client() as client, ThreadPoolExecutor(16) as pool:
        held = hold_streams(channel, 3)

        def append(index: int) -> grpc.StatusCode:
            try:
                client.append(f"s{index}", [("user", "while full")])
                return grpc.StatusCode.OK
            except MemsvcError as error:
                return error.code
        assert set(pool.map(append, range(32))) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert stored_sessions(server) == []
        with grpc.insecure_channel(server.health) as probes:  # the probe port has no such limit
            assert health_pb2_grpc.HealthStub(probes).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
        held.pop().cancel()
        # The freed slot is reused as soon as the server sees the cancellation.
        outcome = grpc.StatusCode.RESOURCE_EXHAUSTED
        for _ in range(200):
            outcome = append(100)
            if outcome != grpc.StatusCode.RESOURCE_EXHAUSTED:
                break
            time.sleep(0.05)
        assert outcome == grpc.StatusCode.OK
        for stream in held:
            stream.cancel()
    assert stored_sessions(server) == ["s100"]


def test_a_burst_past_the_limit_gets_only_ok_or_resource_exhausted_and_loses_nothing(make_server):
    server = make_server("--max-concurrent-rpcs", "2", "--max-history-messages", "500")
    with grpc.insecure_channel(server.tcp) as channel, server.client() as client, ThreadPoolExecutor(24) as pool:
        held = hold_streams(channel, 1)

        def append(index: int) -> tuple[str, grpc.StatusCode]:
            try:
                client.append("burst", [("user", f"m{index}")])
                return f"m{index}", grpc.StatusCode.OK
            except MemsvcError as error:
                return f"m{index}", error.code
        outcomes = list(pool.map(append, range(200)))
        for stream in held:
            stream.cancel()
    codes = {code for _, code in outcomes}
    assert codes <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, codes
    acknowledged = sorted(content for content, code in outcomes if code == grpc.StatusCode.OK)
    assert acknowledged, "with one slot free, some appends must get through"
    with server.client() as reader:
        assert sorted(m.content for m in reader.get_context("burst").window) == acknowledged


def test_watch_streams_without_the_token_take_no_place_from_token_holders(make_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("the-token")
    server = make_server("--token-file", str(token_file), "--max-concurrent-rpcs", "8",
                         "--health-listen", "127.0.0.1:0")
    with grpc.insecure_channel(server.tcp) as channel, server.client(token="the-token") as client:
        stub = health_pb2_grpc.HealthStub(channel)
        anonymous = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(64)]  # opened, never read
        for index in range(20):
            client.append("s", [("user", f"still served {index}")])
        assert len(client.get_context("s").window) == 16
        # Each is refused: for its missing token or, while eight refusals are still being answered, by the
        # limit itself (gRPC counts a call before any interceptor sees it); none is ever served.
        refusals = set()
        for stream in anonymous:
            with pytest.raises(grpc.RpcError) as refused:
                next(stream)
            refusals.add(refused.value.code())
        assert grpc.StatusCode.UNAUTHENTICATED in refusals
        assert refusals <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED}
    with grpc.insecure_channel(server.health) as probes:  # probes watch without a token on their port
        watch = health_pb2_grpc.HealthStub(probes).Watch(health_pb2.HealthCheckRequest())
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()


@pytest.mark.parametrize(("count", "size", "receive_limit"), [
    (600, 8_000, None),  # 4.8 MB: the default client receives at most 4 MiB
    (1_000, 8_300, 64 * 1024 * 1024),  # just under max_request_bytes (8 MiB): the server's own send limit
])
def test_an_append_is_either_stored_and_acknowledged_or_refused(make_server, count, size, receive_limit):
    server = make_server("--max-history-messages", "2000")
    options = [] if receive_limit is None else [("grpc.max_receive_message_length", receive_limit)]
    with server.client(timeout=60, options=options) as client:
        reply = client.append("big", [("user", f"m{index} " + "x" * size) for index in range(count)])
        assert [m.id for m in reply.messages] == list(range(1, count + 1))
        assert all(m.content == "" and m.role == "user" and m.send_at_unix_nano for m in reply.messages)
        assert client.list_sessions().sessions[0].message_count == count  # stored once, acknowledged once


@pytest.mark.as_process
def test_an_embedding_too_long_for_any_index_is_refused_before_it_is_copied(make_server):
    server = make_server()
    huge = [0.5] * 1_900_000
    with server.client(timeout=60, options=[("grpc.max_send_message_length", 64 << 20)]) as client:
        client.append("s", [("user", "kept")])
        before = rss_mib(server.process.pid)
        with ThreadPoolExecutor(4) as pool:
            outcomes = set(pool.map(lambda _: refusal_of(lambda: client.append("s", [pb.Message(
                role=pb.ROLE_USER, content="x", embedding=huge)])), range(40)))
        assert outcomes == {(grpc.StatusCode.INVALID_ARGUMENT, "EMBEDDING_TOO_LARGE")}
        assert refusal_of(lambda: client.search("s", "kept", query_embedding=huge)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "EMBEDDING_TOO_LARGE")
        # Copied into Python floats, each of these cost ~60 MB: 40 of them took the server to gigabytes.
        assert rss_mib(server.process.pid) - before < 600
        assert [m.content for m in client.get_context("s").window] == ["kept"]


def test_error_memory_requests_far_larger_than_any_valid_one_are_refused_undecoded(client):
    assert refusal_of(lambda: client.record_error("shell", "x" * 7_000_000, "fix")) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE")
    assert refusal_of(lambda: client.record_error("shell", "x" * 20_000, "fix")) == (
        grpc.StatusCode.INVALID_ARGUMENT, "FIELD_TOO_LARGE")  # too long, but decoded and checked field by field
    assert not client.list_errors().records


def refusal_of(call) -> tuple[grpc.StatusCode, str]:
    try:
        call()
    except MemsvcError as error:
        return error.code, error.reason
    return grpc.StatusCode.OK, ""



@pytest.mark.parametrize(("count", "message"), [
    (1_000, {"role": "user", "content": "x"}),  # ~7 bytes each in the request, ~17 in the acknowledgement
    (400, {"role": "assistant", "content": "y", "sender": "s" * 20}),
    (600, {"role": "user", "content": "傳送者: bob\nz"}),  # the sender comes out of a legacy header
])
def test_a_stored_append_is_acknowledged_under_a_small_request_limit(make_server, count, message):
    server = make_server("--max-request-bytes", "16384", "--max-history-messages", "2000")
    with server.client(timeout=30) as client:
        request = pb.AppendRequest(session_id="tiny", messages=[pb.Message(**{
            **message, "role": pb.ROLE_USER if message["role"] == "user" else pb.ROLE_ASSISTANT})] * count)
        assert request.ByteSize() <= 16384
        reply = client.append("tiny", [message] * count)
        assert [m.id for m in reply.messages] == list(range(1, count + 1))
        assert len({m.sender for m in reply.messages}) == 1
        assert client.list_sessions().sessions[0].message_count == count
