"""Awaiting work other threads do: the search pool's bounds and turns, and concurrent futures settled on
the event loop whichever thread completes them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from memsvc.core.errors import ResourceExhausted
from memsvc.rpc.offload import FairPool, settled_here


def test_a_future_completed_on_the_loops_thread_is_settled_there_and_then():
    async def scenario() -> None:
        started: concurrent.futures.Future[str] = concurrent.futures.Future()
        waiter = settled_here(started)
        started.set_result("stored")  # as the journal's write run by the loop completes an Append
        assert waiter.done() and waiter.result() == "stored", "no turn of the loop needed"
        failed: concurrent.futures.Future[str] = concurrent.futures.Future()
        refused = settled_here(failed)
        failed.set_exception(OSError("disk full"))
        with pytest.raises(OSError, match="disk full"):
            await refused

    asyncio.run(scenario())


def test_a_future_completed_on_another_thread_reaches_the_loop_through_it():
    async def scenario() -> None:
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        waiter = settled_here(started)
        worker = threading.Thread(target=started.set_result, args=(7,))
        worker.start()
        worker.join()
        assert not waiter.done(), "set from the loop's own thread only"
        assert await asyncio.wait_for(waiter, 5) == 7

    asyncio.run(scenario())


def test_the_pool_serves_sessions_in_turn_and_refuses_past_its_bounds():
    pool = FairPool("searches", workers=1, per_key=3, total=4)
    gate = threading.Event()
    order: list[str] = []

    def call(name: str) -> str:
        gate.wait(5)
        order.append(name)
        return name

    async def scenario() -> None:
        first = asyncio.ensure_future(pool.run("a", lambda: call("a1")))
        await asyncio.sleep(0.05)  # a1 is running on the one worker: the others wait their turn
        waiting = [asyncio.ensure_future(pool.run(key, lambda name=name: call(name)))
                   for key, name in (("a", "a2"), ("a", "a3"), ("b", "b1"))]
        await asyncio.sleep(0)
        with pytest.raises(ResourceExhausted) as refused:
            await pool.run("c", lambda: call("c1"))
        assert refused.value.reason == "TOO_MANY_IN_FLIGHT"
        gate.set()
        await asyncio.gather(first, *waiting)

    try:
        asyncio.run(scenario())
    finally:
        pool.close()
    assert order == ["a1", "a2", "b1", "a3"], "session b's search goes before a's second waiting one"
