"""What the sync and asyncio clients share: the channel, the call metadata and the plan of one call.

Owns turning a target, token and TLS material into a grpcio channel (sync or asyncio), one
callable per RPC on it, and, for each call, the request built from plain values, its metadata
(the bearer token; `memsvc-session` for per-session RPCs), its deadline and its retry policy.
Must never wait or retry itself: `client` and `aio` run the plan.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import grpc
from google.protobuf.message import Message as ProtoMessage

from memsvc_client import results
from memsvc_client.convert import fields_of, to_proto
from memsvc_client.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from memsvc_client.rpcs import RPCS, SESSION_METADATA, Rpc, session_header

_SHAPES = {(False, False): "unary_unary", (False, True): "unary_stream", (True, False): "stream_unary"}
"The channel method making each RPC's callable, by (request streaming, response streaming)."

DEFAULT_TIMEOUT = 10.0
"""Seconds a call may take, all its attempts included, unless the client or the call says otherwise."""

FIT_TIMEOUT = 300.0
"""FitContext's default deadline (or the client's, when longer): its stages may wait for the summary model."""

MessageLike = tuple[str, str] | Mapping[str, Any] | results.Message | ProtoMessage
"""A message to append: ("user", "hello"), {"role": "assistant", "content": "hi", "sender": "bot"},
a `Message` read back from memsvc, or a generated `memory_pb2.Message`."""


def message_fields(item: MessageLike) -> object:
    if isinstance(item, tuple):
        role, content = item
        return {"role": role, "content": content}
    return item if isinstance(item, ProtoMessage) else fields_of(item)


def messages_fields(messages: Iterable[MessageLike]) -> list[object]:
    if isinstance(messages, tuple) and len(messages) == 2 and all(isinstance(part, str) for part in messages):
        raise TypeError("messages is a list of (role, content) pairs: wrap a single pair in a list")
    return [message_fields(item) for item in messages]


ChatMessage = Mapping[str, Any] | str
"""A run's message for `fit_context`: an OpenAI chat-completions message as a dict, or its JSON text."""


def chat_messages(messages: Iterable[ChatMessage]) -> list[str]:
    if isinstance(messages, str | Mapping):
        raise TypeError("messages is a list of chat messages: wrap a single message in a list")
    return [item if isinstance(item, str) else json.dumps(item, ensure_ascii=False) for item in messages]


def fit_fields(session_id: str, vendor: str, model: str, messages: Iterable[ChatMessage],
               options: Mapping[str, Any]) -> dict[str, Any]:
    return {"session_id": session_id, "vendor": vendor, "model": model, "messages": chat_messages(messages),
            **options}


@dataclass(frozen=True)
class Plan:
    """One call: what to send, with which metadata, until when, retried how."""

    rpc: Rpc
    request: ProtoMessage
    metadata: tuple[tuple[str, str], ...]
    deadline: float
    policy: RetryPolicy

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class Connection:
    """A connection to one memsvc server.

    `target` is "HOST:PORT", "[::1]:PORT", "unix:///abs/path" or "unix:relative/path". `timeout` is
    every call's deadline in seconds (per call: `timeout=`), retries included. `token` is the bearer
    token of a server with token_file. TLS: `root_certificates` (the server's CA, PEM), plus
    `private_key` and `certificate_chain` for mTLS; `tls=True` alone trusts the system's CAs.
    `retry=None` turns retries off. `options` are grpcio channel options.
    """

    channels: ModuleType
    """grpc or grpc.aio: where the channel comes from."""

    def __init__(self, target: str, *, timeout: float = DEFAULT_TIMEOUT, token: str | None = None,
                 tls: bool = False, root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None, options: Sequence[tuple[str, Any]] = (),
                 retry: RetryPolicy | None = DEFAULT_RETRY):
        self.target = target
        self.timeout = timeout
        self.retry = retry or NO_RETRY
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        if tls or root_certificates or certificate_chain:
            if target.startswith("unix:"):
                raise ValueError("memsvc serves unix sockets in plaintext: drop the TLS arguments for a unix target")
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
            self.channel = self.channels.secure_channel(target, credentials, options=list(options))
        else:
            self.channel = self.channels.insecure_channel(target, options=list(options))
        self.stubs = {name: getattr(self.channel, _SHAPES[rpc.request_streaming, rpc.response_streaming])(
                          rpc.path, request_serializer=rpc.request.SerializeToString,
                          response_deserializer=rpc.response.FromString)
                      for name, rpc in RPCS.items()}

    def plan(self, name: str, fields: Mapping[str, Any], timeout: float | None, retry: bool | None = None) -> Plan:
        rpc = RPCS[name]
        request = to_proto(rpc.request, fields)
        retried = rpc.retry_safe if retry is None else retry
        return Plan(rpc, request, self.call_metadata(rpc, request), time.monotonic() + (timeout or self.timeout),
                    self.retry if retried else NO_RETRY)

    def call_metadata(self, rpc: Rpc, request: ProtoMessage) -> tuple[tuple[str, str], ...]:
        """The token, and the session the request names (a stream's: its first request's)."""
        session_id = rpc.session_of(request)
        if session_id:
            return (*self.metadata, (SESSION_METADATA, session_header(session_id)))
        return self.metadata

    def import_requests(self, parts: Iterable[object]) -> tuple[ProtoMessage, Iterator[ProtoMessage]]:
        """ImportSession's first request, and all of them: parts are an export's results (or dicts,
        or generated ExportSessionResponse / ImportSessionRequest messages)."""
        request_class = RPCS["ImportSession"].request

        def request(part: object) -> ProtoMessage:
            if isinstance(part, ProtoMessage):  # the two messages have the same fields and numbers
                return request_class.FromString(part.SerializeToString())
            return to_proto(request_class, part)

        stream = (request(part) for part in parts)
        first = next(stream, None)
        if first is None:
            raise ValueError("import_session needs the parts of an export, starting with its head")
        return first, itertools.chain([first], stream)

