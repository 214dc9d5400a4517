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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Self

import grpc

from memsvc_client import results as r
from memsvc_client.connection import FIT_TIMEOUT, ChatMessage, Connection, MessageLike, fit_fields, messages_fields
from memsvc_client.convert import from_proto, to_proto
from memsvc_client.errors import from_rpc_error
from memsvc_client.rpcs import RPCS


class Client(Connection):
    """A blocking connection to one memsvc server, safe to share between threads; the arguments are
    `Connection`'s."""

    channels = grpc

    def connect(self) -> None:
        self.channel = self.open_channel()
        self.stubs = self.callables(self.channel)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel (and the twin made by `twin`)."""
        self.release()

    def release(self) -> None:
        self.channel.close()
        self.release_twins()

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

    def get_context(self, session_id: str, *, request_text: str = "", omit_payloads: bool = False,
                    timeout: float | None = None) -> r.GetContextResponse:
        """The recent window and the turn context carrying the rolling summary (None when none). A window
        too large for one reply comes without its oldest messages: `omitted_messages` counts them."""
        return self._call("GetContext", {"session_id": session_id, "request_text": request_text,
                                         "omit_payloads": omit_payloads}, timeout)

    def search(self, session_id: str, query: str, *, match: str | None = None, limit: int = 0,
               time_range: str | None = None, timeout: float | None = None, **options: Any) -> r.SearchResponse:
        """Find messages: `match` "hybrid" (the server's default when None), "semantic" or "keyword";
        `time_range` "day", "week", "month", "year" or "all"; any other SearchRequest field by name
        (`since_unix_nano`, `until_unix_nano`, `include_window`, `query_embedding`, ...); `explain=True` gives
        each match its `explanation` (ranks and scores in the keyword and semantic rankings, fused, reranked,
        tier)."""
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
                      newest_first: bool = False, omit_payloads: bool = False,
                      timeout: float | None = None) -> r.ListMessagesResponse:
        """One page of every message the session stores (archive and history.json), with payloads unless
        `omit_payloads`; `newest_first` pages from the newest back (each page still oldest first). A page
        also ends before the server's max_reply_bytes: follow next_page_token."""
        return self._call("ListMessages", {"session_id": session_id, "page_size": page_size,
                                           "page_token": page_token, "newest_first": newest_first,
                                           "omit_payloads": omit_payloads}, timeout)

    def delete_messages(self, session_id: str, ids: Iterable[int] = (), *, last: int = 0,
                        timeout: float | None = None, retry: bool | None = None) -> r.DeleteMessagesResponse:
        """Delete the messages with these ids, or the newest `last`, from every store; returns them.
        Retried only with `ids` (a retry then deletes nothing more), unless `retry` says otherwise."""
        ids = list(ids)
        return self._call("DeleteMessages", {"session_id": session_id, "ids": ids, "last": last}, timeout,
                          bool(ids) if retry is None else retry)

    def replace_messages(self, session_id: str, messages: Iterable[MessageLike], *, idempotency_key: str = "",
                         expected_last_id: int | None = None, timeout: float | None = None,
                         retry: bool | None = None) -> r.ReplaceMessagesResponse:
        """Replace the session's whole history with `messages` in one step (the rolling summary is deleted);
        with `expected_last_id` (0: none), only while that is still its newest message, else
        `FailedPrecondition` HISTORY_CHANGED. Retried only with an `idempotency_key`, unless `retry` says
        otherwise."""
        fields = {"session_id": session_id, "messages": messages_fields(messages), "idempotency_key": idempotency_key,
                  "expected_last_id": expected_last_id}
        return self._call("ReplaceMessages", fields, timeout, bool(idempotency_key) if retry is None else retry)

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

    # -- ShardService --------------------------------------------------------

    def get_server_info(self, session_id: str = "", *, timeout: float | None = None) -> r.GetServerInfoResponse:
        """Which server answered (shard name, version, data directory). With `session_id` the call
        is routed like that session's, and says whether this server stores it or holds it."""
        return self._call("GetServerInfo", {"session_id": session_id}, timeout)

    def export_session(self, session_id: str, *, page_size: int = 0,
                       timeout: float | None = None) -> Iterator[r.ExportSessionResponse]:
        """The session whole, part by part as it streams: its head, its messages in id order a page
        at a time, then its end (the totals `import_session` checks). `timeout` bounds the whole
        stream; there is none by default, since a long session takes a while. Not retried."""
        rpc = RPCS["ExportSession"]
        request = to_proto(rpc.request, {"session_id": session_id, "page_size": page_size})
        replies = self.stubs["ExportSession"](request, timeout=timeout, metadata=self.call_metadata(rpc, request))
        try:
            for reply in replies:
                yield from_proto(rpc.result, reply)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            replies.cancel()  # the caller stopped reading: end the call (no-op once it is complete)

    def import_session(self, parts: Iterable[object], *, timeout: float | None = None) -> r.ImportSessionResponse:
        """Store an exported session on this server, whole or not at all: `parts` are what
        `export_session` gave (or the lines of `memsvc export`, parsed), in order. Routed by the
        head's session id. Not retried."""
        rpc = RPCS["ImportSession"]
        first, requests = self.import_requests(parts)
        failed: list[BaseException] = []
        calls: list[grpc.Future] = []

        def sent() -> Iterator[object]:
            """The parts; when reading them fails, the call ends (grpcio would wait for more)."""
            try:
                yield from requests
            except GeneratorExit:  # the call ended first (grpcio closes the parts)
                raise
            except BaseException as error:
                failed.append(error)
                while not calls:
                    time.sleep(0.001)
                calls[0].cancel()

        calls.append(self.stubs["ImportSession"].future(sent(), timeout=timeout,
                                                        metadata=self.call_metadata(rpc, first)))
        try:
            reply = calls[0].result()
        except (grpc.RpcError, grpc.FutureCancelledError) as error:
            if failed:
                raise failed[0] from None
            raise from_rpc_error(error) from None  # type: ignore[arg-type]
        return from_proto(rpc.result, reply)

    def hold_session(self, session_id: str, *, timeout: float | None = None) -> r.HoldSessionResponse:
        """Hold a session still while it moves: every call about it is UNAVAILABLE until released."""
        return self._call("HoldSession", {"session_id": session_id}, timeout)

    def release_session(self, session_id: str, *, drop: bool = False,
                        timeout: float | None = None) -> r.ReleaseSessionResponse:
        """End a hold; `drop` removes the session from this server first (it moved away)."""
        return self._call("ReleaseSession", {"session_id": session_id, "drop": drop}, timeout)

    def list_held_sessions(self, *, page_size: int = 0, page_token: str = "",
                           timeout: float | None = None) -> r.ListHeldSessionsResponse:
        return self._call("ListHeldSessions", {"page_size": page_size, "page_token": page_token}, timeout)

    def pause_session_creation(self, seconds: int, *,
                               timeout: float | None = None) -> r.PauseSessionCreationResponse:
        """Refuse Appends creating a session for `seconds` (0 ends the pause); it ends by itself."""
        return self._call("PauseSessionCreation", {"seconds": seconds}, timeout)

    def list_tenants(self, *, timeout: float | None = None) -> r.ListTenantsResponse:
        """The tenants the server serves (an admin's call)."""
        return self._call("ListTenants", {}, timeout)
