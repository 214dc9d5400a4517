"""The search pool: its bounds and turns."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memsvc.core.errors import ResourceExhausted
from memsvc.rpc.offload import FairPool


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
