"""The clients' ShardService calls against a real server, blocking and asyncio: server info, a
session exported and imported through the streams, and parts that fail to be read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from memsvc_client import AsyncClient, Client, ExportSessionResponse, NotFoundError

pytestmark = pytest.mark.in_process


class Unreadable(Exception):
    pass


def failing_after(parts: list[ExportSessionResponse], count: int) -> Iterator[ExportSessionResponse]:
    yield from parts[:count]
    raise Unreadable("the parts could not be read any further")


def let_go(client: Client, session: str) -> None:
    """Wait (at most 10 s) until the server has undone an import its client ended: until then the id
    is held for it (UNAVAILABLE `SESSION_MOVING` to a new import)."""
    deadline = time.monotonic() + 10
    while client.get_server_info(session).session_held:
        assert time.monotonic() < deadline, "the ended import still holds the session"
        time.sleep(0.02)


def test_the_blocking_client_exports_imports_and_says_who_answered(make_server, tmp_path) -> None:
    source = make_server("--shard-name", "source")
    target = make_server(directory=tmp_path / "target")
    with Client(source.unix) as one, Client(target.tcp) as two:
        one.append("s", [("user", "hello"), ("assistant", "hi")], idempotency_key="k")
        info = one.get_server_info()
        assert info.shard_name == "source" and info.contract_version and not info.session_stored
        parts = list(one.export_session("s", page_size=1))
        assert [len(part.messages) for part in parts] == [0, 1, 1, 0]
        assert parts[0].head.session_id == "s" and parts[-1].end.messages == 2
        with pytest.raises(Unreadable):
            two.import_session(failing_after(parts, 2))  # the caller's error, and the call ended
        let_go(two, "s")
        assert not two.list_sessions().sessions
        assert two.import_session(parts).sha256 == parts[-1].end.sha256
        assert two.append("s", [("user", "hello")], idempotency_key="k").replayed
        with pytest.raises(NotFoundError):
            next(two.export_session("nobody"))
        with pytest.raises(ValueError, match="starting with its head"):
            two.import_session([])


def test_the_asyncio_client_does_the_same(make_server, tmp_path) -> None:
    source = make_server()
    target = make_server(directory=tmp_path / "target")

    async def scenario() -> None:
        async with AsyncClient(source.tcp) as one, AsyncClient(target.unix) as two:
            await one.append("s", [("user", "hello"), ("assistant", "hi")])
            parts = [part async for part in one.export_session("s")]
            with pytest.raises(Unreadable):
                await two.import_session(failing_after(parts, 1))
            with Client(target.tcp) as probe:
                await asyncio.to_thread(let_go, probe, "s")
            assert not (await two.list_sessions()).sessions
            imported = await two.import_session(parts)
            assert imported.messages == 2 and (await two.get_server_info("s")).session_stored
            assert (await two.hold_session("s")).stored
            assert (await two.list_held_sessions()).session_ids == ["s"]
            assert (await two.release_session("s")).was_held
            assert (await two.pause_session_creation(30)).paused_until_unix_nano > 0
            assert (await two.pause_session_creation(0)).paused_until_unix_nano == 0

    asyncio.run(scenario())
