"""Who may call over HTTP, and how many at once: the gRPC listeners' rules, applied to HTTP.

Owns the bearer-token check of each HTTP call (rpc/auth.py's `refusal`, the
same check gRPC applies) and the listener's own budget of
`max_concurrent_rpcs` calls in flight: past it a call is refused at once,
never queued, as grpcio refuses. Must never log or echo the token or the
authorization header.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from memsvc.core.errors import ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.rpc.auth import refusal


class Gate:
    def __init__(self, token: bytes | None, max_in_flight: int):
        self._token = token
        self._max_in_flight = max_in_flight
        self._in_flight = 0

    @contextmanager
    def admit(self, authorization: str | None) -> Iterator[None]:
        """Hold one place for a call presenting this authorization header; raises when it may not run."""
        if self._token is not None:
            refused = refusal(self._token, authorization)
            if refused is not None:
                raise refused
        if self._in_flight >= self._max_in_flight:
            raise ResourceExhausted(f"Concurrent RPC limit exceeded! ({self._max_in_flight} calls in flight on the "
                                    "HTTP listener, max_concurrent_rpcs); retry with backoff",
                                    reason=Reason.CONCURRENT_RPC_LIMIT)
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
