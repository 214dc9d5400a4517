"""Who may call over HTTP, and how many at once: the gRPC listeners' rules, applied to HTTP.

Owns applying rpc/access.py's admission (the same token, role and tenant
checks gRPC applies) to each HTTP call, and the listener's own budget of
`max_concurrent_rpcs` calls in flight: past it a call is refused at once,
never queued, as grpcio refuses. Must never log or echo the token or the
authorization header.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from memsvc.core.errors import MemsvcError, ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.rpc.access import Access, acting, done_acting
from memsvc.tenancy.tenants import Caller


class Gate:
    def __init__(self, access: Access, max_in_flight: int):
        self.access = access
        self._max_in_flight = max_in_flight
        self._in_flight = 0

    @contextmanager
    def admit(self, method: str, authorization: str | None, tenant: str | None,
              request: object = None) -> Iterator[tuple[Caller, str]]:
        """Hold one place for a call of `method` presenting these headers, its caller and the tenant it acts for
        current for the block (and yielded); raises when it may not run (audited, naming the session `request`
        names)."""
        try:
            caller, acting_for = self.access.admit(method, authorization, tenant)
        except MemsvcError as refused:
            self.access.audit_refusal(method, authorization, tenant, request, refused)
            raise
        if self._in_flight >= self._max_in_flight:
            raise ResourceExhausted(f"Concurrent RPC limit exceeded! ({self._max_in_flight} calls in flight on the "
                                    "HTTP listener, max_concurrent_rpcs); retry with backoff",
                                    reason=Reason.CONCURRENT_RPC_LIMIT)
        self._in_flight += 1
        token = acting(caller, acting_for)
        try:
            yield caller, acting_for
        finally:
            done_acting(token)
            self._in_flight -= 1
