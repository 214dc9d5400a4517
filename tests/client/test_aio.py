"""memsvc_client.AsyncClient against a real server: the same calls, awaited on one event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os

import grpc
import pytest

from memsvc_client import AsyncClient, InvalidArgumentError, NotFoundError, RetryPolicy, UnavailableError

pytestmark = pytest.mark.in_process

QUICK = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05)


def test_calls_results_and_errors(server):
    async def scenario() -> None:
        async with AsyncClient(server.unix) as memory:
            appended = await memory.append("a1", [("user", "We deploy on Fridays?"), ("assistant", "Never.")])
            window = (await memory.get_context("a1")).window
            assert [(m.id, m.role) for m in window] == [(m.id, role) for m, role in zip(
                appended.messages, ["user", "assistant"], strict=True)]
            hits = (await memory.search("a1", "fridays", match="keyword")).hits
            assert [hit.message.content for hit in hits] == ["We deploy on Fridays?"]
            lesson = await memory.record_error("shell", "command not found: jq", "install jq")
            found = await memory.lookup_errors("shell", "jq: command not found")
            assert [record.id for record in found.records] == [lesson.record.id]
            with pytest.raises(InvalidArgumentError) as raised:
                await memory.append("bad\nid", [("user", "x")])
            assert raised.value.reason == "INVALID_SESSION_ID"
            with pytest.raises(NotFoundError) as missing:
                await memory.get_summary("never")
            assert missing.value.reason == "SESSION_NOT_FOUND"
    asyncio.run(scenario())


def test_many_calls_in_flight_on_one_client(server):
    async def scenario() -> list[int]:
        async with AsyncClient(server.tcp) as memory:
            await asyncio.gather(*(memory.append(f"c{n}", [("user", f"hello {n}")]) for n in range(20)))
            contexts = await asyncio.gather(*(memory.get_context(f"c{n}") for n in range(20)))
            return [len(context.window) for context in contexts]
    assert asyncio.run(scenario()) == [1] * 20


def test_retries_follow_the_contract(server, proxy):
    async def scenario() -> None:
        async with AsyncClient(proxy.target, retry=QUICK) as memory:
            await memory.append("r1", [("user", "x")])
            proxy.fail_next("GetContext", grpc.StatusCode.UNAVAILABLE, times=2)
            assert len((await memory.get_context("r1")).window) == 1
            proxy.fail_next("Append", grpc.StatusCode.UNAVAILABLE)
            with pytest.raises(UnavailableError):
                await memory.append("r1", [("user", "no key")])
            proxy.fail_next("FitContext", grpc.StatusCode.UNAVAILABLE, times=2)
            fitted = await memory.fit_context("r1", "openai", "gpt-4o", [
                {"role": "system", "content": "Be brief."}, '{"role": "user", "content": "hi"}'])
            assert fitted.fits and fitted.messages[1] == '{"role": "user", "content": "hi"}'
            assert [(s.stage, s.outcome) for s in fitted.stages] == [("check_threshold", "unchanged")]
    asyncio.run(scenario())
    assert len(proxy.seen("GetContext")) == 3 and len(proxy.seen("Append")) == 2
    fits = proxy.seen("FitContext")
    assert len(fits) == 3 and all(call.metadata["memsvc-session"] == "r1" and call.deadline_seconds > 240
                                  for call in fits)


def open_descriptors() -> int:
    """The process's descriptors other than files (sockets, pipes, event fds), which a channel kept open can
    keep. Files are left out: the server runs in this process, and its archive and vector files come and
    go meanwhile."""
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sum(not path.startswith("/") for path in paths)


def test_one_client_serves_every_event_loop_and_thread_with_one_channel_per_loop(server):
    memory = AsyncClient(server.tcp)  # made outside any event loop, as an adapter's owner often does

    async def turn(session: str, text: str) -> int:
        await memory.append(session, [("user", text)])
        return len((await memory.get_context(session)).window)

    assert asyncio.run(turn("loops", "first loop")) == 1
    assert asyncio.run(turn("loops", "second loop")) == 2, "asyncio.run twice: a new loop, the same client"
    baseline = open_descriptors()
    for n in range(50):
        asyncio.run(turn("loops-many", f"loop {n}"))
    assert open_descriptors() <= baseline + 4, "a closed loop's channel is dropped, not kept open"

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:  # six loops at once, in six threads
        counts = list(pool.map(lambda n: asyncio.run(turn(f"thread-{n}", "from a worker thread")), range(12)))
    assert counts == [1] * 12

    async def reused() -> bool:
        channel = memory.channel
        await asyncio.gather(*(memory.get_context("loops") for _ in range(20)))
        return memory.channel is channel

    assert asyncio.run(reused()), "every call on one loop goes over that loop's one channel"

    async def closed() -> None:
        await memory.close()
        with pytest.raises(RuntimeError, match="closed"):
            await memory.get_context("loops")

    asyncio.run(closed())
