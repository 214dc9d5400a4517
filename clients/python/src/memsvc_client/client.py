"""`Client`: the blocking memsvc client, one method per RPC.

Owns running a call: every attempt within the call's one deadline, waits between attempts from
the retry policy for the RPCs the contract marks safe (Append only with an idempotency key,
Summarize only when asked), failures raised as `MemsvcError` subclasses. Must never hold
memory logic: every method is one RPC.

    with Client("127.0.0.1:50051") as memory:            # or "unix:///run/memsvc.sock"
        memory.append("s1", [("user", "hello")])
        print(memory.get_context("s1").window)
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Self

import grpc

from memsvc_client import results as r
from memsvc_client.connection import FIT_TIMEOUT, ChatMessage, Connection, MessageLike, fit_fields, messages_fields
from memsvc_client.convert import from_proto
from memsvc_client.errors import from_rpc_error


class Client(Connection):
    """A blocking connection to one memsvc server, safe to share between threads; the arguments are
    `Connection`'s."""

    channels = grpc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _call(self, name: str, fields: Mapping[str, Any], timeout: float | None, retry: bool | None = None) -> Any:
        plan = self.plan(name, fields, timeout, retry)
        attempt = 1
        while True:
            try:
                reply = self.stubs[name](plan.request, timeout=plan.remaining(), metadata=plan.metadata)
                return from_proto(plan.rpc.result, reply)
            except grpc.RpcError as error:
                failure = from_rpc_error(error)
            wait = plan.policy.delay(failure, attempt, plan.remaining())
            if wait is None:
                raise failure
            time.sleep(wait)
            attempt += 1

    # -- MemoryService -------------------------------------------------------

    def append(self, session_id: str, messages: Iterable[MessageLike], *, idempotency_key: str = "",
               timeout: float | None = None, retry: bool | None = None) -> r.AppendResponse:
        """Store messages at the end of a session; durable when this returns. Retried only with an
        `idempotency_key` (a retry then stores nothing twice), unless `retry` says otherwise."""
        fields = {"session_id": session_id, "messages": messages_fields(messages), "idempotency_key": idempotency_key}
        return self._call("Append", fields, timeout, bool(idempotency_key) if retry is None else retry)

    def get_context(self, session_id: str, *, request_text: str = "",
                    timeout: float | None = None) -> r.GetContextResponse:
        """The recent window and the turn context carrying the rolling summary (None when none)."""
        return self._call("GetContext", {"session_id": session_id, "request_text": request_text}, timeout)

    def search(self, session_id: str, query: str, *, match: str | None = None, limit: int = 0,
               time_range: str | None = None, timeout: float | None = None, **options: Any) -> r.SearchResponse:
        """Find messages: `match` "semantic" (default), "keyword" or "hybrid"; `time_range` "day",
        "week", "month", "year" or "all"; any other SearchRequest field by name (`since_unix_nano`,
        `until_unix_nano`, `include_window`, `query_embedding`, ...)."""
        fields = {"session_id": session_id, "query": query, "match": match, "limit": limit,
                  "time_range": time_range, **options}
        return self._call("Search", fields, timeout)

    def compact(self, session_id: str, *, timeout: float | None = None) -> r.CompactResponse:
        return self._call("Compact", {"session_id": session_id}, timeout)

    def summarize(self, session_id: str, *, timeout: float | None = None,
                  retry: bool = False) -> r.SummarizeResponse:
        """Fold new messages into the rolling summary now; waits for an LLM, so give it a long timeout."""
        return self._call("Summarize", {"session_id": session_id}, timeout, retry)

    def get_summary(self, session_id: str, *, timeout: float | None = None) -> r.GetSummaryResponse:
        return self._call("GetSummary", {"session_id": session_id}, timeout)

    def reset(self, session_id: str, mode: str = "summary", *, timeout: float | None = None) -> r.ResetResponse:
        """Clear the conversation from every store: `mode` "summary" keeps the rolling summary, "all" not."""
        return self._call("Reset", {"session_id": session_id, "mode": mode}, timeout)

    def remove_session(self, session_id: str, *, timeout: float | None = None) -> r.RemoveSessionResponse:
        return self._call("RemoveSession", {"session_id": session_id}, timeout)

    def list_sessions(self, *, page_size: int = 0, page_token: str = "", session_id_contains: str = "",
                      timeout: float | None = None) -> r.ListSessionsResponse:
        return self._call("ListSessions", {"page_size": page_size, "page_token": page_token,
                                                     "session_id_contains": session_id_contains}, timeout)

    def list_messages(self, session_id: str, *, page_size: int = 0, page_token: str = "",
                      newest_first: bool = False, timeout: float | None = None) -> r.ListMessagesResponse:
        """One page of every message the session stores (archive and history.json), with payloads;
        `newest_first` pages from the newest back (each page still oldest first)."""
        return self._call("ListMessages", {"session_id": session_id, "page_size": page_size,
                                           "page_token": page_token, "newest_first": newest_first}, timeout)

    def delete_messages(self, session_id: str, ids: Iterable[int] = (), *, last: int = 0,
                        timeout: float | None = None, retry: bool | None = None) -> r.DeleteMessagesResponse:
        """Delete the messages with these ids, or the newest `last`, from every store; returns them.
        Retried only with `ids` (a retry then deletes nothing more), unless `retry` says otherwise."""
        ids = list(ids)
        return self._call("DeleteMessages", {"session_id": session_id, "ids": ids, "last": last}, timeout,
                          bool(ids) if retry is None else retry)

    # -- FitService ----------------------------------------------------------

    def fit_context(self, session_id: str, vendor: str, model: str, messages: Iterable[ChatMessage], *,
                    overflow: bool = False, previous_model: str = "", context_window: int = 0,
                    reserved_tokens: int = 0, timeout: float | None = None,
                    retry: bool | None = None) -> r.FitContextResponse:
        """A run's messages (chat-completions dicts, or their JSON) fitted to `model`'s window, before
        calling it. The reply's `messages` are JSON strings: `[json.loads(m) for m in reply.messages]`.
        `overflow=True` after the provider answered with a context-length error; `previous_model` once,
        after switching models. The stages may call the summary model, so the default deadline is
        FIT_TIMEOUT (300 s), or the client's when longer. Retried after UNAVAILABLE: the contract marks
        it IDEMPOTENT (a repeat may cost the summary model's calls again, never a message)."""
        options = {"overflow": overflow, "previous_model": previous_model, "context_window": context_window,
                   "reserved_tokens": reserved_tokens}
        return self._call("FitContext", fit_fields(session_id, vendor, model, messages, options),
                          timeout or max(self.timeout, FIT_TIMEOUT), retry)

    # -- ErrorMemoryService --------------------------------------------------

    def record_error(self, tool_name: str, symptom: str, action: str, *, outcome: str = "resolved",
                     timeout: float | None = None, **fields: Any) -> r.RecordErrorResponse:
        """Store a lesson (`cause`, `keywords`, `session_id` by name); only "resolved" ones are kept."""
        request = {"tool_name": tool_name, "symptom": symptom, "action": action, "outcome": outcome, **fields}
        return self._call("RecordError", request, timeout)

    def lookup_errors(self, tool_name: str, error_text: str, *, limit: int = 0,
                      timeout: float | None = None) -> r.LookupErrorsResponse:
        """Lessons related to a failure of `tool_name`; `related_errors` is text to append to the tool result."""
        fields = {"tool_name": tool_name, "error_text": error_text, "limit": limit}
        return self._call("LookupErrors", fields, timeout)

    def search_errors(self, query: str, *, limit: int = 0, timeout: float | None = None) -> r.SearchErrorsResponse:
        return self._call("SearchErrors", {"query": query, "limit": limit}, timeout)

    def list_errors(self, *, page_size: int = 0, page_token: str = "", tool_name: str = "",
                    timeout: float | None = None) -> r.ListErrorsResponse:
        fields = {"page_size": page_size, "page_token": page_token, "tool_name": tool_name}
        return self._call("ListErrors", fields, timeout)

    def update_error_action(self, record_id: str, action: str, *,
                            timeout: float | None = None) -> r.UpdateErrorActionResponse:
        return self._call("UpdateErrorAction", {"id": record_id, "action": action}, timeout)

    def delete_error(self, record_id: str, *, timeout: float | None = None) -> r.DeleteErrorResponse:
        return self._call("DeleteError", {"id": record_id}, timeout)
