"""Concurrent futures settled on the event loop, whichever thread completes them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from memsvc.runtime.futures import settled_here


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
