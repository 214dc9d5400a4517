"""`AsyncClient`: the asyncio memsvc client (grpc.aio), the same methods as `Client`, awaited.

Owns running a call on whichever event loop awaits it: one grpc.aio channel per loop (a
channel belongs to the loop it was made on), made at that loop's first call and reused by every
later one, from any thread; attempts within one deadline, `asyncio.sleep` between them for the
RPCs the contract marks safe, failures raised as `MemsvcError` subclasses. Must never hold
memory logic: every method is one RPC, documented on `Client`.

    async with AsyncClient("127.0.0.1:50051") as memory:
        await memory.append("s1", [("user", "hello")])
        print((await memory.get_context("s1")).window)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Self

import grpc
from grpc import aio

from memsvc_client import results as r
from memsvc_client.connection import FIT_TIMEOUT, ChatMessage, Connection, MessageLike, fit_fields, messages_fields
from memsvc_client.convert import from_proto, to_proto
from memsvc_client.errors import from_rpc_error
from memsvc_client.rpcs import RPCS


class AsyncClient(Connection):
    """A connection to one memsvc server for every event loop that awaits it, in any thread; the
    arguments are `Connection`'s.

    Each loop gets its own channel at its first call (`asyncio.run` twice, `Runner.run_sync` in a
    worker thread, a thread pool of loops), kept while the loop lives: a call never opens a
    connection of its own. A channel whose loop has closed is dropped at the next loop's first
    call (grpcio closes a channel once unreferenced). `close` closes them all: this loop's
    awaited, a running loop's handed to that loop, a stopped loop's dropped.
    """

    channels = aio

    def connect(self) -> None:
        self._loops: dict[asyncio.AbstractEventLoop, tuple[aio.Channel, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def channel(self) -> aio.Channel:
        """The running loop's grpc.aio channel (made now if this loop has none yet)."""
        return self._opened()[0]

    @property
    def stubs(self) -> dict[str, Any]:
        """One callable per RPC on the running loop's channel."""
        return self._opened()[1]

    def _opened(self) -> tuple[aio.Channel, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        opened = self._loops.get(loop)
        if opened is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this AsyncClient is closed")
                for gone in [other for other in self._loops if other.is_closed()]:
                    del self._loops[gone]
                opened = self._loops.get(loop)
                if opened is None:
                    channel = self.open_channel()
                    opened = self._loops[loop] = (channel, self.callables(channel))
        return opened

    async def close(self) -> None:
        """Close every loop's channel (and the twin made by `twin`); calls after this raise RuntimeError."""
        here = asyncio.get_running_loop()
        opened = self._take()
        if here in opened:
            await opened.pop(here)[0].close()
        self._close_elsewhere(opened)
        self.release_twins()

    def release(self) -> None:
        """`close` without waiting: each channel's close is handed to its own loop."""
        self._close_elsewhere(self._take())
        self.release_twins()

    def _take(self) -> dict[asyncio.AbstractEventLoop, tuple[aio.Channel, dict[str, Any]]]:
        with self._lock:
            self._closed = True
            opened, self._loops = self._loops, {}
        return opened

    @staticmethod
    def _close_elsewhere(opened: dict[asyncio.AbstractEventLoop, tuple[aio.Channel, dict[str, Any]]]) -> None:
        for loop, (channel, _) in opened.items():
            if not loop.is_running():  # nothing would run the close: grpcio closes it once unreferenced
                continue
            closing = channel.close()
            try:
                asyncio.run_coroutine_threadsafe(closing, loop)
            except RuntimeError:  # the loop closed meanwhile
                closing.close()

    async def _call(self, name: str, fields: Mapping[str, Any], timeout: float | None,
                    retry: bool | None = None) -> Any:
        plan = self.plan(name, fields, timeout, retry)
        attempt = 1
        while True:
            try:
                reply = await self.stubs[name](plan.request, timeout=plan.remaining(), metadata=plan.metadata)
                return from_proto(plan.rpc.result, reply)
            except grpc.RpcError as error:
                failure = from_rpc_error(error)
            wait = plan.policy.delay(failure, attempt, plan.remaining())
            if wait is None:
                raise failure
            await asyncio.sleep(wait)
            attempt += 1

    # -- MemoryService -------------------------------------------------------

    async def append(self, session_id: str, messages: Iterable[MessageLike], *, idempotency_key: str = "",
                     timeout: float | None = None, retry: bool | None = None) -> r.AppendResponse:
        fields = {"session_id": session_id, "messages": messages_fields(messages), "idempotency_key": idempotency_key}
        return await self._call("Append", fields, timeout, bool(idempotency_key) if retry is None else retry)

    async def get_context(self, session_id: str, *, request_text: str = "", omit_payloads: bool = False,
                          timeout: float | None = None) -> r.GetContextResponse:
        return await self._call("GetContext", {"session_id": session_id, "request_text": request_text,
                                               "omit_payloads": omit_payloads}, timeout)

    async def search(self, session_id: str, query: str, *, match: str | None = None, limit: int = 0,
                     time_range: str | None = None, timeout: float | None = None, **options: Any) -> r.SearchResponse:
        fields = {"session_id": session_id, "query": query, "match": match, "limit": limit,
                  "time_range": time_range, **options}
        return await self._call("Search", fields, timeout)

    async def compact(self, session_id: str, *, timeout: float | None = None) -> r.CompactResponse:
        return await self._call("Compact", {"session_id": session_id}, timeout)

    async def summarize(self, session_id: str, *, timeout: float | None = None,
                        retry: bool = False) -> r.SummarizeResponse:
        return await self._call("Summarize", {"session_id": session_id}, timeout, retry)

    async def get_summary(self, session_id: str, *, timeout: float | None = None) -> r.GetSummaryResponse:
        return await self._call("GetSummary", {"session_id": session_id}, timeout)

    async def reset(self, session_id: str, mode: str = "summary", *, timeout: float | None = None) -> r.ResetResponse:
        return await self._call("Reset", {"session_id": session_id, "mode": mode}, timeout)

    async def remove_session(self, session_id: str, *, timeout: float | None = None) -> r.RemoveSessionResponse:
        return await self._call("RemoveSession", {"session_id": session_id}, timeout)

    async def list_sessions(self, *, page_size: int = 0, page_token: str = "", session_id_contains: str = "",
                            timeout: float | None = None) -> r.ListSessionsResponse:
        return await self._call("ListSessions", {"page_size": page_size, "page_token": page_token,
                                                 "session_id_contains": session_id_contains}, timeout)

    async def list_messages(self, session_id: str, *, page_size: int = 0, page_token: str = "",
                            newest_first: bool = False, omit_payloads: bool = False,
                            timeout: float | None = None) -> r.ListMessagesResponse:
        return await self._call("ListMessages", {"session_id": session_id, "page_size": page_size,
                                                 "page_token": page_token, "newest_first": newest_first,
                                                 "omit_payloads": omit_payloads}, timeout)

    async def delete_messages(self, session_id: str, ids: Iterable[int] = (), *, last: int = 0,
                              timeout: float | None = None, retry: bool | None = None) -> r.DeleteMessagesResponse:
        ids = list(ids)
        return await self._call("DeleteMessages", {"session_id": session_id, "ids": ids, "last": last}, timeout,
                                bool(ids) if retry is None else retry)

    async def replace_messages(self, session_id: str, messages: Iterable[MessageLike], *, idempotency_key: str = "",
                               expected_last_id: int | None = None, timeout: float | None = None,
                               retry: bool | None = None) -> r.ReplaceMessagesResponse:
        fields = {"session_id": session_id, "messages": messages_fields(messages), "idempotency_key": idempotency_key,
                  "expected_last_id": expected_last_id}
        return await self._call("ReplaceMessages", fields, timeout, bool(idempotency_key) if retry is None else retry)

    # -- FitService ----------------------------------------------------------

    async def fit_context(self, session_id: str, vendor: str, model: str, messages: Iterable[ChatMessage], *,
                          overflow: bool = False, previous_model: str = "", context_window: int = 0,
                          reserved_tokens: int = 0, timeout: float | None = None,
                          retry: bool | None = None) -> r.FitContextResponse:
        options = {"overflow": overflow, "previous_model": previous_model, "context_window": context_window,
                   "reserved_tokens": reserved_tokens}
        return await self._call("FitContext", fit_fields(session_id, vendor, model, messages, options),
                                timeout or max(self.timeout, FIT_TIMEOUT), retry)

    # -- ErrorMemoryService --------------------------------------------------

    async def record_error(self, tool_name: str, symptom: str, action: str, *, outcome: str = "resolved",
                           timeout: float | None = None, **fields: Any) -> r.RecordErrorResponse:
        request = {"tool_name": tool_name, "symptom": symptom, "action": action, "outcome": outcome, **fields}
        return await self._call("RecordError", request, timeout)

    async def lookup_errors(self, tool_name: str, error_text: str, *, limit: int = 0,
                            timeout: float | None = None) -> r.LookupErrorsResponse:
        fields = {"tool_name": tool_name, "error_text": error_text, "limit": limit}
        return await self._call("LookupErrors", fields, timeout)

    async def search_errors(self, query: str, *, limit: int = 0,
                            timeout: float | None = None) -> r.SearchErrorsResponse:
        return await self._call("SearchErrors", {"query": query, "limit": limit}, timeout)

    async def list_errors(self, *, page_size: int = 0, page_token: str = "", tool_name: str = "",
                          timeout: float | None = None) -> r.ListErrorsResponse:
        fields = {"page_size": page_size, "page_token": page_token, "tool_name": tool_name}
        return await self._call("ListErrors", fields, timeout)

    async def update_error_action(self, record_id: str, action: str, *,
                                  timeout: float | None = None) -> r.UpdateErrorActionResponse:
        return await self._call("UpdateErrorAction", {"id": record_id, "action": action}, timeout)

    async def delete_error(self, record_id: str, *, timeout: float | None = None) -> r.DeleteErrorResponse:
        return await self._call("DeleteError", {"id": record_id}, timeout)

    # -- ShardService --------------------------------------------------------

    async def get_server_info(self, session_id: str = "", *,
                              timeout: float | None = None) -> r.GetServerInfoResponse:
        return await self._call("GetServerInfo", {"session_id": session_id}, timeout)

    async def export_session(self, session_id: str, *, page_size: int = 0,
                             timeout: float | None = None) -> AsyncIterator[r.ExportSessionResponse]:
        rpc = RPCS["ExportSession"]
        request = to_proto(rpc.request, {"session_id": session_id, "page_size": page_size})
        call = self.stubs["ExportSession"](request, timeout=timeout, metadata=self.call_metadata(rpc, request))
        try:
            async for reply in call:
                yield from_proto(rpc.result, reply)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    async def import_session(self, parts: Iterable[object], *,
                             timeout: float | None = None) -> r.ImportSessionResponse:
        rpc = RPCS["ImportSession"]
        first, requests = self.import_requests(parts)
        failed: list[BaseException] = []

        async def sent() -> AsyncIterator[object]:
            try:
                for request in requests:
                    yield request
            except GeneratorExit:  # the call ended first
                raise
            except BaseException as error:  # reading the parts failed: end the call, then say why
                failed.append(error)
                call.cancel()

        call = self.stubs["ImportSession"](sent(), timeout=timeout, metadata=self.call_metadata(rpc, first))
        try:
            reply = await call
        except (grpc.RpcError, asyncio.CancelledError) as error:
            if failed:
                raise failed[0] from None
            if isinstance(error, asyncio.CancelledError):
                raise
            raise from_rpc_error(error) from None
        return from_proto(rpc.result, reply)

    async def hold_session(self, session_id: str, *, timeout: float | None = None) -> r.HoldSessionResponse:
        return await self._call("HoldSession", {"session_id": session_id}, timeout)

    async def release_session(self, session_id: str, *, drop: bool = False,
                              timeout: float | None = None) -> r.ReleaseSessionResponse:
        return await self._call("ReleaseSession", {"session_id": session_id, "drop": drop}, timeout)

    async def list_held_sessions(self, *, page_size: int = 0, page_token: str = "",
                                 timeout: float | None = None) -> r.ListHeldSessionsResponse:
        return await self._call("ListHeldSessions", {"page_size": page_size, "page_token": page_token}, timeout)

    async def pause_session_creation(self, seconds: int, *,
                                     timeout: float | None = None) -> r.PauseSessionCreationResponse:
        return await self._call("PauseSessionCreation", {"seconds": seconds}, timeout)

    async def list_tenants(self, *, timeout: float | None = None) -> r.ListTenantsResponse:
        """The tenants the server serves (an admin's call)."""
        return await self._call("ListTenants", {}, timeout)
