"""A thin, typed Python client over the generated stubs.

Owns the connection, default deadlines and turning statuses into
`MemsvcClientError` with the server's ErrorInfo reason. Must never hold
memory logic: every method is one RPC.

    with Client("127.0.0.1:50051") as memory:            # or "unix:///run/memsvc.sock"
        memory.append("s1", [("user", "hello")])
        print(memory.get_context("s1").window)

TLS: pass the server's CA as `root_certificates` (PEM bytes), plus
`private_key` and `certificate_chain` when the server requires client
certificates; `tls=True` alone trusts the system's CAs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Self

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.v1 import error_memory_pb2 as epb
from memsvc.v1 import error_memory_pb2_grpc, fit_pb2_grpc, memory_pb2_grpc
from memsvc.v1 import fit_pb2 as fpb
from memsvc.v1 import memory_pb2 as pb

DEFAULT_TIMEOUT = 10.0
FIT_TIMEOUT = 300.0
"FitContext's default deadline: its stages may wait for the summary model."
ROLES = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}


class MemsvcClientError(Exception):
    """A failed RPC: its status code, the server's stable reason and message."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str):
        super().__init__(f"{code.name} {reason}: {message}")
        self.code, self.reason, self.message = code, reason, message

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> MemsvcClientError:
        reason = ""
        status = rpc_status.from_call(error)
        for detail in status.details if status else ():
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reason = info.reason
        return cls(error.code(), reason, error.details() or "")


MessageLike = pb.Message | tuple[str, str]


def _message(item: MessageLike) -> pb.Message:
    if isinstance(item, pb.Message):
        return item
    role, content = item
    return pb.Message(role=ROLES[role], content=content)


class Client:
    def __init__(self, target: str, *, timeout: float = DEFAULT_TIMEOUT, token: str | None = None,
                 tls: bool = False, root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None, options: Sequence[tuple[str, Any]] = ()):
        self.timeout = timeout
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if tls or root_certificates or certificate_chain:
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
            self.channel = grpc.secure_channel(target, credentials, options=list(options))
        else:
            self.channel = grpc.insecure_channel(target, options=list(options))
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)
        self.errors = error_memory_pb2_grpc.ErrorMemoryServiceStub(self.channel)
        self.fit = fit_pb2_grpc.FitServiceStub(self.channel)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _call(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self.metadata)
        except grpc.RpcError as error:
            raise MemsvcClientError.from_rpc_error(error) from None

    # -- MemoryService -------------------------------------------------------

    def append(self, session_id: str, messages: Iterable[MessageLike], *, idempotency_key: str = "",
               timeout: float | None = None) -> pb.AppendResponse:
        request = pb.AppendRequest(session_id=session_id, messages=[_message(m) for m in messages],
                                   idempotency_key=idempotency_key)
        return self._call(self.memory.Append, request, timeout)

    def get_context(self, session_id: str, *, request_text: str = "",
                    timeout: float | None = None) -> pb.GetContextResponse:
        return self._call(self.memory.GetContext,
                          pb.GetContextRequest(session_id=session_id, request_text=request_text), timeout)

    def search(self, session_id: str, query: str, *, match: pb.Match = pb.MATCH_UNSPECIFIED, limit: int = 0,
               timeout: float | None = None, **options: Any) -> pb.SearchResponse:
        request = pb.SearchRequest(session_id=session_id, query=query, match=match, limit=limit, **options)
        return self._call(self.memory.Search, request, timeout)

    def compact(self, session_id: str, *, timeout: float | None = None) -> pb.CompactResponse:
        return self._call(self.memory.Compact, pb.CompactRequest(session_id=session_id), timeout)

    def summarize(self, session_id: str, *, timeout: float | None = None) -> pb.SummarizeResponse:
        return self._call(self.memory.Summarize, pb.SummarizeRequest(session_id=session_id), timeout)

    def get_summary(self, session_id: str, *, timeout: float | None = None) -> pb.GetSummaryResponse:
        return self._call(self.memory.GetSummary, pb.GetSummaryRequest(session_id=session_id), timeout)

    def reset(self, session_id: str, mode: pb.ResetMode = pb.RESET_MODE_SUMMARY, *,
              timeout: float | None = None) -> pb.ResetResponse:
        return self._call(self.memory.Reset, pb.ResetRequest(session_id=session_id, mode=mode), timeout)

    def remove_session(self, session_id: str, *, timeout: float | None = None) -> pb.RemoveSessionResponse:
        return self._call(self.memory.RemoveSession, pb.RemoveSessionRequest(session_id=session_id), timeout)

    def list_sessions(self, *, page_size: int = 0, page_token: str = "",
                      timeout: float | None = None) -> pb.ListSessionsResponse:
        return self._call(self.memory.ListSessions,
                          pb.ListSessionsRequest(page_size=page_size, page_token=page_token), timeout)

    # -- FitService ------------------------------------------------------------

    def fit_context(self, session_id: str, vendor: str, model: str, messages: Iterable[dict[str, Any] | str], *,
                    overflow: bool = False, previous_model: str = "", context_window: int = 0,
                    reserved_tokens: int = 0, timeout: float | None = None) -> fpb.FitContextResponse:
        """The run's messages (chat-completions dicts or their JSON) fitted to `model`'s window.

        The reply's `messages` are JSON strings: `[json.loads(m) for m in reply.messages]`.
        It may call the summary model, so its default deadline is FIT_TIMEOUT, not the client's.
        """
        request = fpb.FitContextRequest(
            session_id=session_id, vendor=vendor, model=model,
            messages=[m if isinstance(m, str) else json.dumps(m, ensure_ascii=False) for m in messages],
            overflow=overflow, previous_model=previous_model, context_window=context_window,
            reserved_tokens=reserved_tokens)
        return self._call(self.fit.FitContext, request, timeout or max(self.timeout, FIT_TIMEOUT))

    # -- ErrorMemoryService --------------------------------------------------

    def record_error(self, tool_name: str, symptom: str, action: str, *, outcome: epb.Outcome = epb.OUTCOME_RESOLVED,
                     timeout: float | None = None, **fields: Any) -> epb.RecordErrorResponse:
        request = epb.RecordErrorRequest(tool_name=tool_name, symptom=symptom, action=action, outcome=outcome,
                                         **fields)
        return self._call(self.errors.RecordError, request, timeout)

    def lookup_errors(self, tool_name: str, error_text: str, *, limit: int = 0,
                      timeout: float | None = None) -> epb.LookupErrorsResponse:
        request = epb.LookupErrorsRequest(tool_name=tool_name, error_text=error_text, limit=limit)
        return self._call(self.errors.LookupErrors, request, timeout)

    def search_errors(self, query: str, *, limit: int = 0, timeout: float | None = None) -> epb.SearchErrorsResponse:
        return self._call(self.errors.SearchErrors, epb.SearchErrorsRequest(query=query, limit=limit), timeout)

    def list_errors(self, *, page_size: int = 0, page_token: str = "", tool_name: str = "",
                    timeout: float | None = None) -> epb.ListErrorsResponse:
        request = epb.ListErrorsRequest(page_size=page_size, page_token=page_token, tool_name=tool_name)
        return self._call(self.errors.ListErrors, request, timeout)

    def update_error_action(self, record_id: str, action: str, *,
                            timeout: float | None = None) -> epb.UpdateErrorActionResponse:
        return self._call(self.errors.UpdateErrorAction, epb.UpdateErrorActionRequest(id=record_id, action=action),
                          timeout)

    def delete_error(self, record_id: str, *, timeout: float | None = None) -> epb.DeleteErrorResponse:
        return self._call(self.errors.DeleteError, epb.DeleteErrorRequest(id=record_id), timeout)
