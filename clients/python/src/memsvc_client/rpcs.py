"""The contract's RPCs as the clients call them, read from the generated descriptors.

Owns, per RPC: its gRPC path and shape (unary, or streaming one way), request and response
classes, the result dataclass it becomes, whether the contract marks it safe to retry
(`idempotency_level`), and where its request names the session it acts on (then
`SESSION_METADATA` carries the id, for proxies routing by session). Must never make calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message as ProtoMessage

from memsvc_client import results
from memsvc_client.v1 import error_memory_pb2, fit_pb2, memory_pb2, shards_pb2

TENANT_METADATA = "memsvc-tenant"
"""Request metadata naming the tenant an admin of every tenant acts for (a server with tenants_file)."""
SESSION_METADATA = "memsvc-session"
"""Request metadata naming the session a call acts on, percent-encoded (`session_header`): a proxy in
front of shards routes by it."""


def session_header(session_id: str) -> str:
    """The id as SESSION_METADATA carries it: its UTF-8 bytes, A-Z a-z 0-9 - . _ ~ as they are and every
    other byte as %XX (upper-case hex), as the Node and Go clients write it; ids made only of the first
    kind travel unchanged."""
    return quote(session_id.encode("utf-8", "surrogatepass"), safe="")

_UNKNOWN = descriptor_pb2.MethodOptions.IDEMPOTENCY_UNKNOWN


@dataclass(frozen=True)
class Rpc:
    name: str
    path: str
    request: type[ProtoMessage]
    response: type[ProtoMessage]
    result: type
    retry_safe: bool
    session_path: tuple[str, ...]
    """The fields leading to the session id in a request: ("session_id",), ("head", "session_id")
    for ImportSession's first request, () for an RPC that acts on no one session."""
    request_streaming: bool = False
    response_streaming: bool = False

    @property
    def per_session(self) -> bool:
        return bool(self.session_path)

    def session_of(self, request: ProtoMessage) -> str:
        """The session a request names ("" when none)."""
        value: object = request
        for name in self.session_path:
            value = getattr(value, name)
        return value if isinstance(value, str) else ""


def _session_path(method: MethodDescriptor) -> tuple[str, ...]:
    fields = method.input_type.fields_by_name
    if "session_id" in fields:
        return ("session_id",)
    for field in method.input_type.fields:
        if field.message_type is not None and "session_id" in field.message_type.fields_by_name:
            return (field.name, "session_id")
    return ()


def _rpc(service: ServiceDescriptor, method: MethodDescriptor, per_session_service: bool) -> Rpc:
    return Rpc(
        name=method.name,
        path=f"/{service.full_name}/{method.name}",
        request=message_factory.GetMessageClass(method.input_type),
        response=message_factory.GetMessageClass(method.output_type),
        result=getattr(results, method.output_type.name),
        retry_safe=method.GetOptions().idempotency_level != _UNKNOWN,
        session_path=_session_path(method) if per_session_service else (),
        request_streaming=method.client_streaming,
        response_streaming=method.server_streaming,
    )


def _all() -> dict[str, Rpc]:
    table = {}
    # Every session_id names the session the call acts on (FitContext may change its summary), but
    # RecordError's: that one is provenance.
    for service, per_session in ((memory_pb2.DESCRIPTOR.services_by_name["MemoryService"], True),
                                 (error_memory_pb2.DESCRIPTOR.services_by_name["ErrorMemoryService"], False),
                                 (fit_pb2.DESCRIPTOR.services_by_name["FitService"], True),
                                 (shards_pb2.DESCRIPTOR.services_by_name["ShardService"], True)):
        for method in service.methods:
            table[method.name] = _rpc(service, method, per_session)
    return table


RPCS = _all()
