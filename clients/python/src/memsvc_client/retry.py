"""When and how long to wait before trying a call again.

Owns the policy: only UNAVAILABLE is retried (the server is starting, draining or restarting,
or storage failed: nothing was stored), with capped exponential backoff and full jitter, and
never past the call's deadline. Which RPCs may be retried at all is the contract's word
(`rpcs.Rpc.retry_safe`). Must never make calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc

from memsvc_client.errors import MemsvcError


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` counts the first call too; waits grow from `initial_backoff` by `multiplier` up to
    `max_backoff` seconds, each drawn uniformly below that bound (full jitter)."""

    attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0

    def delay(self, error: MemsvcError, attempt: int, remaining: float) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to give up and raise `error`."""
        if error.code != grpc.StatusCode.UNAVAILABLE or attempt >= self.attempts:
            return None
        wait = random.uniform(0, min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1)))
        return wait if wait < remaining else None


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)
