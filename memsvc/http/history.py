"""`GET /dashboard/history`: the server's metrics history (runtime/history.py) as JSON, for the dashboard's plots.

Owns translating one GET into one `History.plot` of the tenant the caller may
see: its own tenant; an admin of every tenant sees all tenants together, or
the one it names in `memsvc-tenant` (as on every call). Admission is the
contract's (http/gate.py: token, tenant, the listener's budget), with any
role: the numbers name no session and no text. Must never compute a metric
(the history does) nor take anything from the query string.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memsvc.core.errors import MemsvcError
from memsvc.http.contract import Contract
from memsvc.http.gate import Gate
from memsvc.rpc.access import AUTHORIZATION, TENANT_METADATA
from memsvc.runtime.history import ALL, History
from memsvc.tenancy.tenants import ANY

PATH = "/dashboard/history"
METHOD = "MetricsHistory"
"The name calls of this path are admitted (and refused) under: no RPC has it, so every role may."


class HistoryEndpoint:
    def __init__(self, history: History, gate: Gate, contract: Contract):
        self.history = history
        self.gate = gate
        self.contract = contract
        "Answers a refusal as a Connect error, the shape the dashboard reads every failure in."

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, b"the metrics history is read with GET\n", b"text/plain", [(b"allow", b"GET")])
            return
        named = headers.get(TENANT_METADATA) or None
        try:
            with self.gate.admit(METHOD, headers.get(AUTHORIZATION), named) as (caller, tenant):
                plot = self.history.plot(ALL if caller.tenant == ANY and named is None else tenant)
        except MemsvcError as refused:
            await self.contract.refuse(refused, send)
            return
        body = b"" if scope["method"] == "HEAD" else msgspec.json.encode(plot)
        await _send(send, 200, body, b"application/json", [(b"cache-control", b"no-store")])


async def _send(send: Any, status: int, body: bytes, content_type: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
