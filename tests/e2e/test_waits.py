"""Every wait is bounded by its caller's deadline, and a call that answered an error never takes effect
afterwards; exports have an idle timeout; holds have a quota and a lease (issue 24, breaks 4 and 6)."""

from __future__ import annotations

import time

import grpc
import pytest

from memsvc_client import MemsvcError, ResourceExhaustedError, UnavailableError
from memsvc_client.v1 import shards_pb2, shards_pb2_grpc
from tests.support import ServerProcess, wait_for

pytestmark = pytest.mark.in_process

MESSAGES = 20_000


def fill(server: ServerProcess, session: str, messages: int = MESSAGES) -> None:
    with server.client(timeout=120) as client:
        for start in range(0, messages, 1000):
            client.append(session, [("user" if n % 2 == 0 else "assistant",
                                     f"message {start + n} about the sandbox deploy " + "x" * 500)
                                    for n in range(1000)])


def stalled_export(server: ServerProcess, session: str) -> tuple[grpc.Channel, object]:
    """An export whose reader takes one part and stops reading (its flow-control window kept small, so the
    server cannot send the whole export ahead)."""
    channel = grpc.insecure_channel(server.tcp, options=[("grpc.http2.bdp_probe", 0),
                                                         ("grpc.http2.lookahead_bytes", 65_536)])
    stream = shards_pb2_grpc.ShardServiceStub(channel).ExportSession(
        shards_pb2.ExportSessionRequest(session_id=session, page_size=100), timeout=600)
    assert next(stream).HasField("head")
    return channel, stream


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value.code


def test_calls_waiting_on_a_stalled_export_end_at_their_deadline_and_never_take_effect(make_server):
    server = make_server()
    fill(server, "big")
    channel, stream = stalled_export(server, "big")
    with server.client(timeout=2, retry=False) as client:
        started = time.monotonic()
        assert code_of(lambda: client.reset("big")) == grpc.StatusCode.DEADLINE_EXCEEDED
        assert code_of(lambda: client.remove_session("big")) == grpc.StatusCode.DEADLINE_EXCEEDED
        assert code_of(lambda: client.hold_session("big")) == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - started < 30
    stream.cancel()  # the export ends: whatever waited for it must not go on now
    channel.close()
    wait_for(lambda: server.logged("export ended before its last part"), timeout=30)
    time.sleep(1)
    with server.client() as client:
        assert client.list_messages("big", page_size=1, newest_first=True).messages[0].id == MESSAGES
        assert client.append("big", [("user", "still here, not held")]).messages[0].id == MESSAGES + 1
        assert client.get_server_info("big").held_sessions == 0
    assert not server.logged("unexpected error"), "a cancelled export is not a bug"


def test_an_export_its_reader_abandons_is_audited_and_frees_its_session_as_it_ends(make_server):
    """grpcio leaves a cancelled stream's generator to asyncio, which closes it in a task of its own: the
    export must still be audited and let go of its session then, not whenever the collector runs."""
    server = make_server()
    fill(server, "big")
    channel, stream = stalled_export(server, "big")
    stream.cancel()
    channel.close()
    wait_for(lambda: [e["outcome"] for e in server.logged("audit") if e["rpc"] == "ExportSession"] == ["CANCELLED"],
             timeout=30)
    with server.client(retry=False) as client:
        assert client.list_messages("big", page_size=1, newest_first=True).messages[0].id == MESSAGES
        assert client.hold_session("big").stored


def test_an_export_whose_reader_stops_ends_after_stream_idle_seconds(make_server):
    server = make_server("--stream-idle-seconds", "2")
    fill(server, "big")
    channel, stream = stalled_export(server, "big")
    wait_for(lambda: server.logged("export ended before its last part"), timeout=60)
    with server.client(timeout=10) as client:
        assert client.reset("big").deleted.archived_messages == MESSAGES, "the session was let go"
    # The reader is told why, once it takes the parts sent before: not left waiting for its own deadline.
    with pytest.raises(grpc.RpcError) as ended:
        list(stream)
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE and "stream_idle_seconds" in ended.value.details()
    channel.close()


def test_holds_have_a_quota_and_a_lease_that_lapses_by_itself(make_server):
    # A lease of 4 s: reservations lapse at 4, the stored session's hold at 6, lapses being ended every 2 s.
    server = make_server("--max-held-sessions", "5", "--hold-lease-seconds", "4")
    with server.client() as client:
        client.append("stored", [("user", "kept here"), ("assistant", "ok")])
        for index in range(4):
            assert not client.hold_session(f"never-{index}").stored
        assert client.hold_session("stored").stored
        with pytest.raises(ResourceExhaustedError) as refused:
            client.hold_session("one-too-many")
        assert refused.value.reason == "HOLD_QUOTA_EXCEEDED"
        info = client.get_server_info("stored")
        assert info.held_sessions == 5 and info.hold_lease_seconds == 4 and info.session_hold_until_unix_nano
        with pytest.raises(UnavailableError):
            client.append("stored", [("user", "too early")])
        assert client.hold_session("stored").stored, "renewed"
        # Reservations lapse at their lease, a stored session's hold half a lease later.
        wait_for(lambda: client.get_server_info().held_sessions < 5, timeout=30)
        assert client.get_server_info("stored").session_held, "reservations lapse first"
        wait_for(lambda: client.get_server_info().held_sessions == 0, timeout=30)
        assert client.append("stored", [("user", "served again")]).messages[0].id == 3
        assert client.append("never-0", [("user", "an id no longer reserved")]).messages[0].id == 1
    assert {entry["effect"] for entry in server.logged("hold lease lapsed")} == {"the session is served here again"}


def test_a_move_whose_lease_lapsed_is_aborted_on_its_target(make_server, tmp_path):
    source = make_server(directory=tmp_path / "source")
    target = make_server("--hold-lease-seconds", "2", directory=tmp_path / "target")
    with source.client() as one, target.client() as two:
        one.append("moving", [("user", "on its way"), ("assistant", "ok")])
        assert not two.hold_session("moving").stored  # the reservation
        one.hold_session("moving")
        assert two.import_session(one.export_session("moving")).held
        # The tool dies here: nothing renews the target's hold, which lapses and takes the import with it.
        wait_for(lambda: two.get_server_info().held_sessions == 0, timeout=30)
        assert not two.list_sessions().sessions, "the aborted import is gone from the target"
        assert two.search("moving", "way", match="keyword", include_window=True).hits == []
        assert one.get_server_info("moving").session_held, "the source stays held (a longer lease)"
    assert [entry["effect"] for entry in target.logged("hold lease lapsed")] == [
        "the move was not released in time: its import is aborted"]
