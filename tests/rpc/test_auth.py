"""The bearer token, end to end through a real server: who gets in, with which status, and what is logged."""

import json
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from memsvc_client import MemsvcError

pytestmark = pytest.mark.in_process

TOKEN = "s3cret-token-0123456789abcdef"


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")  # whitespace around the token, as editors and `echo` leave it
    return path


@pytest.fixture
def guarded(make_server, token_file):
    return make_server("--token-file", str(token_file))


def refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(MemsvcError) as caught:
        call()
    assert caught.value.message
    return caught.value.code, caught.value.reason


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_calls_without_the_right_token_are_refused_and_change_nothing(guarded, transport):
    target = getattr(guarded, transport)
    with guarded.client(target, token=TOKEN) as member:
        member.append("s", [("user", "kept")])
    history = guarded.data_dir / "sessions/s/history.json"
    before = history.read_bytes()
    with guarded.client(target) as stranger:
        assert refusal(lambda: stranger.append("s", [("user", "intruder")])) == (
            grpc.StatusCode.UNAUTHENTICATED, "MISSING_TOKEN")
        assert refusal(lambda: stranger.get_context("s")) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_TOKEN")
        assert refusal(lambda: stranger.list_errors()) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_TOKEN")
    for wrong in ("wrong", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        with guarded.client(target, token=wrong) as impostor:
            assert refusal(lambda: impostor.append("s", [("user", "intruder")])) == (
                grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
            assert refusal(lambda: impostor.append("new", [("user", "intruder")])) == (
                grpc.StatusCode.UNAUTHENTICATED, "INVALID_TOKEN")
    assert history.read_bytes() == before
    assert sorted(path.name for path in (guarded.data_dir / "sessions").iterdir()) == ["s"]
    with guarded.client(target, token=TOKEN) as member:
        assert [m.content for m in member.get_context("s").window] == ["kept"]


@pytest.mark.parametrize("header", [f"Basic {TOKEN}", TOKEN, "Bearer", "Bearer "])
def test_a_header_that_is_not_a_bearer_token_is_refused(guarded, header):
    with grpc.insecure_channel(guarded.tcp) as channel:
        stub = health_pb2_grpc.HealthStub(channel)  # health stays open: use the reflection service instead
        assert stub.Check(health_pb2.HealthCheckRequest(), metadata=(("authorization", header),)).status == \
            health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        with pytest.raises(grpc.RpcError) as caught:
            next(reflection.ServerReflectionInfo(iter([request]), metadata=(("authorization", header),)))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_the_bearer_scheme_is_case_insensitive(guarded):
    with grpc.insecure_channel(guarded.tcp) as channel:
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        reply = next(reflection.ServerReflectionInfo(iter([request]), metadata=(("authorization", f"bearer {TOKEN}"),)))
        assert "memsvc.v1.MemoryService" in {service.name for service in reply.list_services_response.service}


def test_health_check_needs_no_token_but_watch_and_reflection_do(guarded):
    with grpc.insecure_channel(guarded.tcp) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(service="memsvc.v1.MemoryService")).status == \
            health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as refused:
            next(health.Watch(health_pb2.HealthCheckRequest()))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        watch = health.Watch(health_pb2.HealthCheckRequest(), metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            next(reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_the_token_never_reaches_the_log(make_server, token_file):
    server = make_server("--token-file", str(token_file), "--log-level", "debug")
    with server.client(token=TOKEN) as member, server.client(token=TOKEN + "-guess") as impostor:
        member.append("s", [("user", "hello")])
        with pytest.raises(MemsvcError) as refused:
            impostor.append("s", [("user", "hello")])
        assert refused.value.reason == "INVALID_TOKEN"
    assert server.terminate() == 0
    serving = next(json.loads(line) for line in server.log_lines if '"serving"' in line)
    assert serving["token"] is True  # the log says auth is on...
    log = "".join(server.log_lines)
    assert TOKEN not in log and "Bearer" not in log and "authorization" not in log  # ...never what it is


def test_without_token_file_no_token_is_needed(client):
    client.append("s", [("user", "open")])
    assert len(client.get_context("s").window) == 1


@pytest.mark.parametrize("content, message", [("", "is empty"), (" \n\t\n", "is empty"), (None, "cannot be read")])
def test_an_empty_or_unreadable_token_file_stops_the_start(tmp_path, content, message):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "memsvc", "serve", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
         "--token-file", str(path)], check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"token_file {path} {message}" in result.stderr
    assert "serving" not in result.stderr
