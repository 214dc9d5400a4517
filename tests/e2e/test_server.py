"""End to end through a real server (in the test's process): wire, statuses, lifecycle.

Tests that change nothing but a session of their own share one server
(`shared_server`); those that stop it, count its sessions or change its
settings start their own."""

import os
import stat
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from memsvc_client import MemsvcError
from tests.support import stored_sessions

pytestmark = pytest.mark.in_process


def test_append_and_read_the_window_back_over_tcp_and_unix_socket(shared_server):
    server = shared_server
    with server.client(server.tcp) as tcp, server.client(server.unix) as unix:
        stored = tcp.append("both-ways", [("user", "hello"), ("assistant", "hi there")]).messages
        # acknowledged by id, role and time: the contents are not echoed back
        assert [(m.id, m.role, m.content) for m in stored] == [(1, "user", ""), (2, "assistant", "")]
        assert all(m.send_at_unix_nano > 0 for m in stored)
        unix.append("both-ways", [("user", "third")])
        window = unix.get_context("both-ways").window
        assert [m.content for m in window] == ["hello", "hi there", "third"]
        assert tcp.get_context("both-ways").turn_context is None


def test_window_is_limited_to_the_setting(make_server):
    server = make_server("--max-history-messages", "4")
    with server.client() as client:
        for index in range(10):
            client.append("s", [("user", f"m{index}")])
        assert [m.content for m in client.get_context("s").window] == ["m6", "m7", "m8", "m9"]


def test_health_serving_and_reflection_lists_every_service(shared_server):
    with grpc.insecure_channel(shared_server.tcp) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "memsvc.v1.MemoryService", "memsvc.v1.ErrorMemoryService", "memsvc.v1.FitService",
                        "memsvc.v1.ShardService"):
            assert health.Check(health_pb2.HealthCheckRequest(service=service)).status == \
                health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        reply = next(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {service.name for service in reply.list_services_response.service}
        assert {"memsvc.v1.MemoryService", "memsvc.v1.ErrorMemoryService", "memsvc.v1.FitService",
                "memsvc.v1.ShardService", "grpc.health.v1.Health"} <= names


@pytest.mark.parametrize("session_id, messages, code, reason", [
    ("..", [("user", "x")], grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SESSION_ID"),
    ("a\u2066b", [("user", "x")], grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SESSION_ID"),
    ("", [("user", "x")], grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SESSION_ID"),
    ("s", [], grpc.StatusCode.INVALID_ARGUMENT, "NO_MESSAGES"),
    ("s", [dict(content="no role")], grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ROLE"),
    ("s", [dict(role=7, content="x")], grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ROLE"),
    ("s", [("user", "")], grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_CONTENT"),
    ("s", [("user", "x" * (1024 * 1024 + 1))], grpc.StatusCode.INVALID_ARGUMENT, "MESSAGE_TOO_LARGE"),
])
def test_bad_appends_get_a_clear_status_and_change_nothing(shared_server, session_id, messages, code, reason):
    server = shared_server
    with server.client() as client:
        client.append("s", [("user", "kept")])
        history = server.data_dir / "sessions/s/history.json"
        before, sessions = history.read_bytes(), stored_sessions(server)
        with pytest.raises(MemsvcError) as caught:
            client.append(session_id, messages)
        assert (caught.value.code, caught.value.reason) == (code, reason)
        assert caught.value.message
        assert history.read_bytes() == before
        assert stored_sessions(server) == sessions
        assert not list(server.data_dir.parent.glob("escape"))


def test_oversize_request_is_resource_exhausted(make_server):
    server = make_server("--max-request-bytes", "100000")
    with server.client() as client, pytest.raises(MemsvcError) as caught:
        client.append("s", [("user", "x" * 60000), ("user", "y" * 60000)])
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not (server.data_dir / "sessions/s").exists()


def test_idempotent_retry_over_the_wire(shared_server):
    with shared_server.client() as client:
        first = client.append("retried", [("user", "once")], idempotency_key="req-1")
        retry = client.append("retried", [("user", "once")], idempotency_key="req-1")
        assert retry.replayed and list(retry.messages) == list(first.messages)
        assert len(client.get_context("retried").window) == 1


def test_get_summary_of_unknown_session_is_not_found(shared_server):
    with shared_server.client() as client, pytest.raises(MemsvcError) as caught:
        client.get_summary("nobody")
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND")


def test_list_sessions_over_the_wire(client):
    for name in ("b", "a", "c"):
        client.append(name, [("user", "x")])
    first = client.list_sessions(page_size=2)
    assert [s.session_id for s in first.sessions] == ["a", "b"]
    second = client.list_sessions(page_size=2, page_token=first.next_page_token)
    assert [s.session_id for s in second.sessions] == ["c"] and not second.next_page_token
    assert second.sessions[0].message_count == 1 and second.sessions[0].last_append_unix_nano > 0


def test_second_server_on_the_same_data_exits_with_a_clear_message(server):
    other = subprocess.run([sys.executable, "-m", "memsvc", "serve", "--data-dir", str(server.data_dir),
                            "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60, check=False)
    assert other.returncode != 0
    assert "in use by memsvc pid" in other.stderr
    with server.client() as client:  # the first one is unharmed
        client.append("s", [("user", "still here")])


def test_unix_socket_is_owner_only(shared_server):
    mode = stat.S_IMODE(os.stat(shared_server.unix[len("unix://"):]).st_mode)
    assert mode & 0o077 == 0


def test_sigterm_drains_and_exits_zero_keeping_data(server):
    with server.client() as client:
        client.append("s", [("user", "before stop")])
    assert server.terminate() == 0
    assert any('"stopped"' in line for line in server.log_lines)
    server.start()
    with server.client() as client:
        assert [m.content for m in client.get_context("s").window] == ["before stop"]


def test_logs_carry_no_conversation_text(server):
    secret = "tell-nobody-4242"
    with server.client() as client:
        client.append("s", [("user", secret)])
        with pytest.raises(MemsvcError) as refused:
            client.append("s", [("user", secret), ("user", "")])
        assert refused.value.reason == "EMPTY_CONTENT"
    server.terminate()
    assert not any(secret in line for line in server.log_lines)


@pytest.mark.parametrize("payload", [b"\x0a\x03\xff\xfe\xfd", b"\xff\xff\xff", b"\x12\x05\x1a\x03\xc3\x28\x41"])
def test_undecodable_request_bytes_are_invalid_argument_not_unknown(shared_server, payload):
    server, sessions = shared_server, stored_sessions(shared_server)
    with grpc.insecure_channel(server.tcp) as channel:
        append = channel.unary_unary("/memsvc.v1.MemoryService/Append", request_serializer=lambda raw: raw,
                                     response_deserializer=lambda raw: raw)
        with pytest.raises(grpc.RpcError) as caught:
            append(payload, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "could not be decoded" in caught.value.details()
    assert stored_sessions(server) == sessions
