"""The seam between the Connect protocol and memsvc's servicers.

Owns turning each method of a gRPC service descriptor into a Connect
endpoint that calls the servicer's method of the same name, on the same
servicer object the gRPC server runs, so request -> domain call -> reply is
written once (memsvc/rpc) and served twice. A failure leaves the servicer as
a `grpc.Status` (rpc/status.py decided it), which this module re-encodes as
the Connect error of the same code with the same `ErrorInfo`. Each call
has the span a gRPC call has (rpc/instrument.py's attributes and status,
under rpc.system "connect_rpc"), child of the caller's when its headers
carry a W3C traceparent. Must never decide what a call means or which
error it is: the servicers and the domain do.

New RPCs need nothing here: every method of the descriptor is served, unary,
server-streaming (ExportSession) or client-streaming (ImportSession).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, NoReturn

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo
from connectrpc.request import RequestContext
from connectrpc.server import Endpoint
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from google.rpc import status_pb2
from grpc_status import rpc_status

from memsvc.core.errors import MemsvcError
from memsvc.http.gate import Gate
from memsvc.rpc import audit, instrument
from memsvc.rpc.access import AUTHORIZATION, TENANT_METADATA
from memsvc.rpc.status import to_status
from memsvc.runtime import tracing

CODES: dict[grpc.StatusCode, Code] = {code: Code(code.name.lower().replace("cancelled", "canceled"))
                                      for code in grpc.StatusCode if code is not grpc.StatusCode.OK}
"gRPC's codes by Connect's names for them (the protocol spells one differently)."

IDEMPOTENCY = {
    descriptor_pb2.MethodOptions.IDEMPOTENCY_UNKNOWN: IdempotencyLevel.UNKNOWN,
    descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS: IdempotencyLevel.NO_SIDE_EFFECTS,
    descriptor_pb2.MethodOptions.IDEMPOTENT: IdempotencyLevel.IDEMPOTENT,
}


class Aborted(grpc.aio.AbortError):
    """A servicer ended its call with a status, as `context.abort_with_status` does under grpc.aio."""

    def __init__(self, status: grpc.Status):
        super().__init__(status.details)
        self.status = status


class CallContext:
    """What a servicer may ask of its call when the call came over HTTP.

    The part of `grpc.aio.ServicerContext` memsvc's servicers use (rpc/status.py
    ends failed calls with `abort_with_status`, rpc/deadlines.py and
    FitContext read `time_remaining`, from the Connect timeout, and the former
    learns when the call is over); a servicer that starts using more fails its
    HTTP tests with INTERNAL until the method is added here.
    """

    def __init__(self, request: RequestContext[Any, Any]):
        self.request = request
        self._when_done: list[Callable[[Any], object]] = []

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        raise Aborted(status)

    def time_remaining(self) -> float | None:
        """Seconds left of the call's Connect-Timeout-Ms, as grpc.aio's; None when it set none."""
        left = self.request.timeout_ms()
        return None if left is None else max(0.0, left / 1000)

    def add_done_callback(self, callback: Callable[[Any], object]) -> None:
        self._when_done.append(callback)

    def done(self) -> None:
        """The call is over, answered or abandoned (its task cancelled)."""
        for callback in self._when_done:
            callback(self)


def connect_error(status: grpc.Status) -> ConnectError:
    """The Connect error of a gRPC status: same code, message and details (the ErrorInfo)."""
    details: list[Any] = []
    for key, value in status.trailing_metadata or ():
        if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
            details.extend(status_pb2.Status.FromString(value).details)
    return ConnectError(CODES[status.code], status.details, details)


class _Traced:
    """The span of one call over HTTP/JSON: the attributes and status of a gRPC call's span
    (rpc/instrument.py), under the Connect protocol's name."""

    def __init__(self, noted: tracing.Noted):
        self.noted = noted
        self.ended = False

    def admitted(self, tenant: str) -> None:
        self.noted.set(**{"memsvc.tenant": tenant})

    def failed(self, status: grpc.Status) -> ConnectError:
        """The Connect error the call ends with, noted on its span."""
        error = connect_error(status)
        self.noted.set(**{"rpc.connect_rpc.error_code": error.code.value})
        instrument.note_outcome(self.noted, status.code, instrument.reason_in(status.trailing_metadata))
        self.ended = True
        return error

    def finish(self, code: grpc.StatusCode) -> None:
        if not self.ended:
            instrument.note_outcome(self.noted, code, "")


@contextlib.contextmanager
def _traced(method: MethodDescriptor, context: RequestContext[Any, Any], request: object) -> Iterator[_Traced]:
    headers = {key: value for key, value in context.request_headers().items() if key in instrument.TRACE_HEADERS}
    attributes: dict[str, tracing.Attribute] = {
        "rpc.system": "connect_rpc", "rpc.service": method.containing_service.full_name, "rpc.method": method.name,
        **instrument.session_attributes(request)}
    with tracing.served(method.name, headers, **attributes) as noted:
        traced = _Traced(noted)
        try:
            yield traced
        except (asyncio.CancelledError, GeneratorExit):
            traced.finish(grpc.StatusCode.CANCELLED)
            raise
        traced.finish(grpc.StatusCode.OK)


Behaviour = Callable[[Any, CallContext], Any]
"A servicer method: (request or request stream, context) -> reply, or an async iterator of replies."


def _endpoint(method: MethodDescriptor, behaviour: Behaviour, gate: Gate) -> Any:
    if method.client_streaming and method.server_streaming:
        raise TypeError(f"{method.full_name} streams both ways; memsvc/http/calls.py bridges unary, server- and "
                        "client-streaming methods: add its shape there (connectrpc has Endpoint.bidi_stream)")
    info: MethodInfo[Any, Any] = MethodInfo(
        name=method.name, service_name=method.containing_service.full_name,
        input=message_factory.GetMessageClass(method.input_type),
        output=message_factory.GetMessageClass(method.output_type),
        idempotency_level=IDEMPOTENCY[method.GetOptions().idempotency_level])

    async def call(request: Any, context: RequestContext[Any, Any]) -> Message:
        call_context = CallContext(context)
        with _traced(method, context, request) as traced:
            try:
                with gate.admit(method.name, *_credentials(context), request) as (caller, tenant):
                    traced.admitted(tenant)
                    outcome, reply, started = "CANCELLED", None, time.perf_counter()
                    try:
                        reply = await behaviour(request, call_context)
                        outcome = "OK"
                        return reply
                    except Aborted as aborted:
                        outcome = aborted.status.code.name
                        raise
                    finally:
                        audit.record(method.name, caller, tenant, outcome, reply, request)
                        instrument.observe_call(method.name, tenant, request, reply, time.perf_counter() - started)
            except MemsvcError as refused:  # by the gate
                raise traced.failed(to_status(refused)) from None
            except Aborted as aborted:
                raise traced.failed(aborted.status) from None
            finally:
                call_context.done()

    async def stream(request: Message, context: RequestContext[Any, Any]) -> AsyncIterator[Message]:
        """A server stream: the gate admits it once, for as long as it runs."""
        call_context = CallContext(context)
        with _traced(method, context, request) as traced:
            try:
                with gate.admit(method.name, *_credentials(context), request) as (caller, tenant):
                    traced.admitted(tenant)
                    outcome = "CANCELLED"
                    try:
                        async with contextlib.aclosing(behaviour(request, call_context)) as replies:
                            async for reply in replies:
                                yield reply
                        outcome = "OK"
                    except Aborted as aborted:
                        outcome = aborted.status.code.name
                        raise
                    finally:
                        audit.record(method.name, caller, tenant, outcome, request)
            except MemsvcError as refused:
                raise traced.failed(to_status(refused)) from None
            except Aborted as aborted:
                raise traced.failed(aborted.status) from None
            finally:
                call_context.done()

    if method.server_streaming:
        return Endpoint.server_stream(info, stream)
    if method.client_streaming:  # the request stream goes to the servicer as it arrives
        return Endpoint.client_stream(info, call)
    return Endpoint.unary(info, call)


def _credentials(context: RequestContext[Any, Any]) -> tuple[str | None, str | None]:
    """The call's authorization header and the tenant it names (an admin of every tenant's choice)."""
    headers = context.request_headers()
    return headers.get(AUTHORIZATION), headers.get(TENANT_METADATA)


def endpoints(servicers: Mapping[str, object], gate: Gate) -> dict[str, Any]:
    """`/<service>/<method>` -> endpoint, for every method of each named service's descriptor."""
    routes = {}
    for service_name, servicer in servicers.items():
        service = descriptor_pool.Default().FindServiceByName(service_name)
        for method in service.methods:
            routes[f"/{service.full_name}/{method.name}"] = _endpoint(method, getattr(servicer, method.name), gate)
    return routes
