"""What the sync and asyncio clients share: opening a channel, the call metadata and the plan of one call.

Owns turning a target, token and TLS material into a grpcio channel (sync or asyncio), one
callable per RPC on it, and, for each call, the request built from plain values (refused before
it is sent when it is larger than the server takes), its metadata (the bearer token;
`memsvc-session` for per-session RPCs), its deadline and its retry policy. Must never wait or
retry itself, nor decide how many channels there are: `client` and `aio` do.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message as ProtoMessage

from memsvc_client import results
from memsvc_client.convert import fields_of, to_proto
from memsvc_client.errors import ResourceExhaustedError
from memsvc_client.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from memsvc_client.rpcs import RPCS, SESSION_METADATA, TENANT_METADATA, Rpc, session_header

Twin = TypeVar("Twin", bound="Connection")

_SHAPES = {(False, False): "unary_unary", (False, True): "unary_stream", (True, False): "stream_unary"}
"The channel method making each RPC's callable, by (request streaming, response streaming)."

DEFAULT_TIMEOUT = 10.0
"""Seconds a call may take, all its attempts included, unless the client or the call says otherwise."""

FIT_TIMEOUT = 300.0
"""FitContext's default deadline (or the client's, when longer): its stages may wait for the summary model."""

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""The largest request a memsvc server takes by default (its max_request_bytes setting)."""

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
    `retry=None` turns retries off. `max_request_bytes` is the server's setting of that name: a
    larger request is refused before it is sent (RESOURCE_EXHAUSTED, reason REQUEST_TOO_LARGE).
    `options` are grpcio channel options.
    """

    channels: ModuleType
    """grpc or grpc.aio: where the channel comes from."""

    def __init__(self, target: str, *, timeout: float = DEFAULT_TIMEOUT, token: str | None = None,
                 tenant: str | None = None, tls: bool = False, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None,
                 options: Sequence[tuple[str, Any]] = (), retry: RetryPolicy | None = DEFAULT_RETRY,
                 max_request_bytes: int = MAX_REQUEST_BYTES):
        self.target = target
        self.timeout = timeout
        self.retry = retry or NO_RETRY
        self.max_request_bytes = max_request_bytes
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        if tenant:  # an admin of every tenant acting for this one
            self.metadata += ((TENANT_METADATA, tenant),)
        self.credentials: grpc.ChannelCredentials | None = None
        if tls or root_certificates or certificate_chain:
            if target.startswith("unix:"):
                raise ValueError("memsvc serves unix sockets in plaintext: drop the TLS arguments for a unix target")
            self.credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
        # The server sends replies up to its max_request_bytes too; grpcio would refuse any past 4 MiB.
        # The caller's options come first: grpcio takes the first of a repeated option.
        self.options = [*options, ("grpc.max_receive_message_length", max_request_bytes)]
        self.settings: dict[str, Any] = {
            "timeout": timeout, "token": token, "tenant": tenant, "tls": tls, "root_certificates": root_certificates,
            "private_key": private_key, "certificate_chain": certificate_chain, "options": list(options),
            "retry": retry, "max_request_bytes": max_request_bytes}
        """The arguments this connection was made with, for a twin of the other kind."""
        self._twins: dict[type, Connection] = {}
        self._twins_lock = threading.Lock()
        self.connect()

    def connect(self) -> None:
        """Set up the channels: a Client opens its one now, an AsyncClient one per event loop later."""
        raise NotImplementedError

    def twin(self, kind: type[Twin]) -> Twin:
        """This connection's twin of another kind (an AsyncClient's `Client`, a Client's
        `AsyncClient`), with the same target and arguments: made at the first call, the same one
        after, released when this connection closes. For the adapters, whose frameworks call both
        blocking and asyncio methods of one object."""
        if isinstance(self, kind):
            return self
        with self._twins_lock:
            twin = self._twins.get(kind)
            if twin is None:
                twin = self._twins[kind] = kind(self.target, **self.settings)
            return twin  # type: ignore[return-value]

    def release(self) -> None:
        """Close what can be closed without waiting: each kind says how."""
        raise NotImplementedError

    def release_twins(self) -> None:
        with self._twins_lock:
            twins, self._twins = list(self._twins.values()), {}
        for twin in twins:
            twin.release()

    def open_channel(self) -> Any:
        """A new channel to the target (grpcio connects it at its first call)."""
        if self.credentials is not None:
            return self.channels.secure_channel(self.target, self.credentials, options=self.options)
        return self.channels.insecure_channel(self.target, options=self.options)

    @staticmethod
    def callables(channel: Any) -> dict[str, Any]:
        """One callable per RPC on `channel`, by RPC name."""
        return {name: getattr(channel, _SHAPES[rpc.request_streaming, rpc.response_streaming])(
                    rpc.path, request_serializer=rpc.request.SerializeToString,
                    response_deserializer=rpc.response.FromString)
                for name, rpc in RPCS.items()}

    def plan(self, name: str, fields: Mapping[str, Any], timeout: float | None, retry: bool | None = None) -> Plan:
        rpc = RPCS[name]
        request = to_proto(rpc.request, fields)
        self.check_size(name, request)
        retried = rpc.retry_safe if retry is None else retry
        return Plan(rpc, request, self.call_metadata(rpc, request), time.monotonic() + (timeout or self.timeout),
                    self.retry if retried else NO_RETRY)

    def check_size(self, name: str, request: ProtoMessage) -> None:
        """Refuse a request the server would refuse for its size, before it is sent: grpcio's own
        refusal comes after the whole request crossed the network, and carries no reason."""
        size = request.ByteSize()
        if size > self.max_request_bytes:
            raise ResourceExhaustedError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE",
                f"the {name} request is {size} bytes; the server takes at most {self.max_request_bytes} "
                "(max_request_bytes): send fewer or smaller messages per call", {"limit": str(self.max_request_bytes)})

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

