"""The in-process server fixture (tests/support/inprocess.py) keeps servers apart in one process: each
server's log lines are its own, its threads end when it stops, and it refuses what only a process has."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support import wait_for
from tests.support.inprocess import OWNER, InProcessServer

pytestmark = pytest.mark.in_process


def threads_of(server: InProcessServer) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if getattr(thread, OWNER, None) is server]


def test_each_server_logs_only_its_own_lines(make_server, tmp_path: Path):
    # Hold leases lapse in each server's job thread: a line logged off the event loop, by a thread it started.
    first = make_server("--hold-lease-seconds", "1", directory=tmp_path / "first")
    second = make_server("--hold-lease-seconds", "1", directory=tmp_path / "second")
    for server, session_id in ((first, "only-first"), (second, "only-second")):
        with server.client() as client:
            client.append(session_id, [("user", "hello")])
            client.hold_session(session_id)

    for server in (first, second):
        wait_for(lambda server=server: server.logged("hold lease lapsed"), timeout=30)
    assert [entry["data_dir"] for entry in first.logged("serving")] == [str(tmp_path / "first")]
    assert [entry["data_dir"] for entry in second.logged("serving")] == [str(tmp_path / "second")]
    assert {entry["session"] for entry in first.logged("hold lease lapsed")} == {"only-first"}
    assert {entry["session"] for entry in second.logged("hold lease lapsed")} == {"only-second"}


def test_a_stopped_server_leaves_no_thread_and_starts_again(make_server):
    server = make_server()
    with server.client() as client:
        client.append("kept", [("user", "hello")])
    assert threads_of(server)

    assert server.terminate() == 0
    assert threads_of(server) == []
    assert server.logged("stopped")

    server.start()  # the data directory's lock was released
    with server.client() as client:
        assert [message.content for message in client.get_context("kept").window] == ["hello"]


@pytest.mark.parametrize(("flags", "env", "refused"), [
    ((), {"MEMSVC_FAILPOINTS": "journal.fsync=raise"}, "MEMSVC_FAILPOINTS"),
    (("--metrics-listen", "127.0.0.1:0"), {}, "metrics registry"),
])
def test_what_only_a_process_has_is_refused(data_dir: Path, flags: tuple[str, ...], env: dict[str, str],
                                            refused: str):
    with pytest.raises(ValueError, match=refused):
        InProcessServer(data_dir, *flags, env=env).start()
