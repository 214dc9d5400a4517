"""Running CPU-heavy calls off the event loop, each key served in turn, within limits.

One event loop answers every RPC, health checks included: a call that
computes on it for long stalls all of them. A search scans and scores a
session's recent messages in Python (30,000 of them take ~0.2 s), so searches
run on a pool of their own threads. Waiting work is served round robin by
key (the session), so one session's searches cannot starve another's, and
it is bounded: past `per_key` calls of one key or `total` calls in all, a
call is refused at once with RESOURCE_EXHAUSTED (retry with backoff), never
queued without end. The pool is small on purpose: Python threads share the
GIL, so more of them would not search faster, only slow the event loop down.
Must never hold request logic.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from memsvc.core.errors import ResourceExhausted, Unavailable
from memsvc.core.reasons import Reason
from memsvc.runtime import tracing
from memsvc.runtime.futures import settle

T = TypeVar("T")


class _Job:
    def __init__(self, call: Callable[[], Any], loop: asyncio.AbstractEventLoop):
        self.call = call
        self.loop = loop
        self.done: asyncio.Future[Any] = loop.create_future()


class FairPool:
    def __init__(self, name: str, *, workers: int, per_key: int, total: int):
        self.name = name
        self.per_key = per_key
        self.total = total
        self._waiting: collections.OrderedDict[str, collections.deque[_Job]] = collections.OrderedDict()
        self._in_flight: collections.Counter[str] = collections.Counter()
        self._all_in_flight = 0
        self._wake = threading.Condition()
        self._stopping = False
        self._threads = [threading.Thread(target=self._serve, name=f"{name}-{number}", daemon=True)
                         for number in range(workers)]
        for thread in self._threads:
            thread.start()

    async def run(self, key: str, call: Callable[[], T]) -> T:
        """`call()` on a worker thread, after the waiting calls of other keys have had their turn."""
        job = _Job(tracing.carried(call), asyncio.get_running_loop())
        with self._wake:
            if self._in_flight[key] >= self.per_key or self._all_in_flight >= self.total:
                raise ResourceExhausted(
                    f"too many {self.name} calls in flight (at most {self.per_key} for one session, {self.total} "
                    "in all); retry with backoff", reason=Reason.TOO_MANY_IN_FLIGHT)
            self._in_flight[key] += 1
            self._all_in_flight += 1
            self._waiting.setdefault(key, collections.deque()).append(job)
            self._wake.notify()
        try:
            result: T = await job.done
        finally:
            with self._wake:
                self._in_flight[key] -= 1
                self._all_in_flight -= 1
                if not self._in_flight[key]:
                    del self._in_flight[key]
        return result

    def _next(self) -> _Job | None:
        with self._wake:
            self._wake.wait_for(lambda: self._waiting or self._stopping)
            if not self._waiting:
                return None
            key, jobs = next(iter(self._waiting.items()))
            job = jobs.popleft()
            del self._waiting[key]
            if jobs:
                self._waiting[key] = jobs  # to the back of the line: the other keys go first
            return job

    def _serve(self) -> None:
        while (job := self._next()) is not None:
            if job.done.cancelled():
                continue
            try:
                result = job.call()
            except BaseException as exc:  # handed to the caller, whatever it is
                job.loop.call_soon_threadsafe(settle, job.done, None, exc)
            else:
                job.loop.call_soon_threadsafe(settle, job.done, result, None)

    def close(self) -> None:
        """Start nothing more (waiting calls get UNAVAILABLE); calls still running finish on their own."""
        with self._wake:
            self._stopping = True
            waiting = [job for jobs in self._waiting.values() for job in jobs]
            self._waiting.clear()
            self._wake.notify_all()
        for job in waiting:
            job.loop.call_soon_threadsafe(settle, job.done, None, Unavailable(
                "the server is shutting down; retry on the next one", reason=Reason.SHUTTING_DOWN))
