"""The contract's RPCs as the clients call them, read from the generated descriptors.

Owns, per RPC: its gRPC path, request and response classes, the result dataclass it becomes,
whether the contract marks it safe to retry (`idempotency_level`), and whether it acts on one
session (then `SESSION_METADATA` carries the id, for proxies routing by session). Must never
make calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message as ProtoMessage

from memsvc_client import results
from memsvc_client.v1 import error_memory_pb2, fit_pb2, memory_pb2

SESSION_METADATA = "memsvc-session"
"""Request metadata naming the session a call acts on: a proxy in front of shards routes by it."""

_UNKNOWN = descriptor_pb2.MethodOptions.IDEMPOTENCY_UNKNOWN


@dataclass(frozen=True)
class Rpc:
    name: str
    path: str
    request: type[ProtoMessage]
    response: type[ProtoMessage]
    result: type
    retry_safe: bool
    per_session: bool


def _rpc(service: ServiceDescriptor, method: MethodDescriptor, per_session_service: bool) -> Rpc:
    return Rpc(
        name=method.name,
        path=f"/{service.full_name}/{method.name}",
        request=message_factory.GetMessageClass(method.input_type),
        response=message_factory.GetMessageClass(method.output_type),
        result=getattr(results, method.output_type.name),
        retry_safe=method.GetOptions().idempotency_level != _UNKNOWN,
        per_session=per_session_service and "session_id" in method.input_type.fields_by_name,
    )


def _all() -> dict[str, Rpc]:
    table = {}
    # MemoryService's and FitService's session_id names the session acted on (FitContext may change its
    # summary); RecordError's is only provenance.
    for service, per_session in ((memory_pb2.DESCRIPTOR.services_by_name["MemoryService"], True),
                                 (error_memory_pb2.DESCRIPTOR.services_by_name["ErrorMemoryService"], False),
                                 (fit_pb2.DESCRIPTOR.services_by_name["FitService"], True)):
        for method in service.methods:
            table[method.name] = _rpc(service, method, per_session)
    return table


RPCS = _all()
