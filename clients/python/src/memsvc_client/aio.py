"""`AsyncClient`: the asyncio memsvc client (grpc.aio), the same methods as `Client`, awaited.

Owns running a call on the event loop: attempts within one deadline, `asyncio.sleep` between
them for the RPCs the contract marks safe, failures raised as `MemsvcError` subclasses. Must
never hold memory logic: every method is one RPC, documented on `Client`.

    async with AsyncClient("127.0.0.1:50051") as memory:
        await memory.append("s1", [("user", "hello")])
        print((await memory.get_context("s1")).window)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Self

import grpc
from grpc import aio

from memsvc_client import results as r
from memsvc_client.connection import FIT_TIMEOUT, ChatMessage, Connection, MessageLike, fit_fields, messages_fields
from memsvc_client.convert import from_proto
from memsvc_client.errors import from_rpc_error


class AsyncClient(Connection):
    """A connection to one memsvc server for one event loop; the arguments are `Connection`'s."""

    channels = aio

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

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

    async def get_context(self, session_id: str, *, request_text: str = "",
                          timeout: float | None = None) -> r.GetContextResponse:
        return await self._call("GetContext", {"session_id": session_id, "request_text": request_text}, timeout)

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
                            newest_first: bool = False, timeout: float | None = None) -> r.ListMessagesResponse:
        return await self._call("ListMessages", {"session_id": session_id, "page_size": page_size,
                                                 "page_token": page_token, "newest_first": newest_first}, timeout)

    async def delete_messages(self, session_id: str, ids: Iterable[int] = (), *, last: int = 0,
                              timeout: float | None = None, retry: bool | None = None) -> r.DeleteMessagesResponse:
        ids = list(ids)
        return await self._call("DeleteMessages", {"session_id": session_id, "ids": ids, "last": last}, timeout,
                                bool(ids) if retry is None else retry)

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
