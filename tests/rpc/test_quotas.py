"""Quotas and overload, end to end: sessions per server, messages per request, RPCs in flight."""

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import MemsvcError


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
