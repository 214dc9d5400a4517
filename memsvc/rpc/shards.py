"""ShardService: translates server info, session export and import, holds and pauses to domain calls.

Owns the proto <-> domain mapping of an export's parts and the bridge
between gRPC's streams and the domain's blocking iterators: an export is
stepped on worker threads (each step may read the archive), an import runs
on one worker thread that pulls each request from the event loop as it needs
it, so neither side buffers more than one part. Must never decide anything
about a transfer: memsvc/transfer does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from concurrent.futures import TimeoutError as NoPartInTime
from importlib.metadata import version
from typing import Any, TypeVar

import grpc

from memsvc.app import App
from memsvc.core.errors import Unavailable
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.rpc import convert
from memsvc.rpc.access import caller_of, serving, tenant_of
from memsvc.rpc.deadlines import deadline_of
from memsvc.rpc.status import to_status, translated, translated_stream
from memsvc.summary.cursor import Cursor
from memsvc.tenancy.tenants import ANY
from memsvc.transfer.parts import End, Head, Part
from memsvc_client.v1 import shards_pb2 as pb
from memsvc_client.v1 import shards_pb2_grpc

log = logging.getLogger(__name__)

SERVER_VERSION = version("memsvc")
CONTRACT_VERSION = version("memsvc-client")
"The client package carries the contract's version (proto/VERSION), and the server serves the stubs it holds."


T = TypeVar("T")


class ShardServicer(shards_pb2_grpc.ShardServiceServicer):
    def __init__(self, app: App):
        self.app = app

    @translated
    async def GetServerInfo(self, request: pb.GetServerInfoRequest,
                            context: grpc.aio.ServicerContext) -> pb.GetServerInfoResponse:
        holds = serving(self.app).holds
        reply = pb.GetServerInfoResponse(
            shard_name=self.app.settings.shard_name, version=SERVER_VERSION, contract_version=CONTRACT_VERSION,
            data_dir_id=self.app.data_dir_id, started_at_unix_nano=self.app.started_at,
            held_sessions=holds.count(), session_creation_paused_until_unix_nano=holds.pause.creation_paused_until(),
            hold_lease_seconds=self.app.settings.hold_lease_seconds)
        if request.session_id:
            placement = serving(self.app).transfers.placement(request.session_id)
            reply.session_stored, reply.session_held = placement.stored, placement.held
            reply.session_hold_until_unix_nano = placement.hold_until
        return reply

    @translated_stream
    async def ExportSession(self, request: pb.ExportSessionRequest,
                            context: grpc.aio.ServicerContext) -> AsyncGenerator[pb.ExportSessionResponse, None]:
        parts = serving(self.app).transfers.export(request.session_id, request.page_size)
        try:
            async with contextlib.aclosing(_stepped(parts, self.app.settings.stream_idle_seconds, context)) as steps:
                async for part in steps:
                    yield pb.ExportSessionResponse(**_proto_part(part))
        except (asyncio.CancelledError, GeneratorExit):
            log.info("export ended before its last part", extra={
                "session": request.session_id, "why": "its reader cancelled it, went away or stopped reading"})
            raise

    @translated
    async def ImportSession(self, requests: AsyncIterator[pb.ImportSessionRequest],
                            context: grpc.aio.ServicerContext) -> pb.ImportSessionResponse:
        loop, stream = asyncio.get_running_loop(), aiter(requests)
        idle = self.app.settings.stream_idle_seconds

        def parts() -> Iterator[Part]:
            while True:
                try:
                    request = asyncio.run_coroutine_threadsafe(_next(stream), loop).result(idle)
                except NoPartInTime:
                    raise Unavailable(f"no part of the import arrived for {idle:g} s (stream_idle_seconds); nothing "
                                      "was stored", reason=Reason.IMPORT_STALLED) from None
                if request is None:
                    return
                yield _domain_part(request)

        imported = await asyncio.to_thread(serving(self.app).transfers.restore, parts(), deadline_of(context))
        return pb.ImportSessionResponse(session_id=imported.session_id, messages=imported.end.messages,
                                        sha256=imported.end.sha256, held=imported.held)

    @translated
    async def HoldSession(self, request: pb.HoldSessionRequest,
                          context: grpc.aio.ServicerContext) -> pb.HoldSessionResponse:
        # Waits for the session's writers and a summary run in flight: off the event loop.
        stored = await asyncio.to_thread(serving(self.app).transfers.hold, request.session_id, deadline_of(context))
        return pb.HoldSessionResponse(stored=stored)

    @translated
    async def ReleaseSession(self, request: pb.ReleaseSessionRequest,
                             context: grpc.aio.ServicerContext) -> pb.ReleaseSessionResponse:
        released = await asyncio.to_thread(serving(self.app).transfers.release, request.session_id, request.drop,
                                           deadline_of(context))
        reply = pb.ReleaseSessionResponse(was_held=released.was_held)
        if released.deleted is not None:
            reply.deleted.CopyFrom(convert.deleted(released.deleted))
        return reply

    @translated
    async def ListHeldSessions(self, request: pb.ListHeldSessionsRequest,
                               context: grpc.aio.ServicerContext) -> pb.ListHeldSessionsResponse:
        held, token = serving(self.app).transfers.held_page(request.page_size, request.page_token)
        return pb.ListHeldSessionsResponse(session_ids=held, next_page_token=token)

    @translated
    async def ListTenants(self, request: pb.ListTenantsRequest,
                          context: grpc.aio.ServicerContext) -> pb.ListTenantsResponse:
        # An admin of one tenant sees its own name only: the others' names are theirs (and resharding,
        # which lists them all, runs as an admin of every tenant).
        caller = caller_of()
        return pb.ListTenantsResponse(tenants=self.app.tenant_names() if caller.tenant == ANY else [caller.tenant])

    @translated
    async def PauseSessionCreation(self, request: pb.PauseSessionCreationRequest,
                                   context: grpc.aio.ServicerContext) -> pb.PauseSessionCreationResponse:
        return pb.PauseSessionCreationResponse(paused_until_unix_nano=serving(self.app).transfers.pause_creation(
            request.seconds))


_DONE = object()
_SENDING: set[asyncio.Future[None]] = set()
"The statuses of stalled exports being sent, held until sent."


async def _stepped(items: Generator[T, None, None], idle_seconds: float,
                   context: grpc.aio.ServicerContext) -> AsyncGenerator[T, None]:
    """Each item of a blocking iterator, computed on a worker thread; closed (its holds released)
    when the stream ends for any reason, once no step is running. A reader that has not taken an item
    after `idle_seconds` (gRPC's flow control holds the stream at the yield meanwhile) gets its call
    ended (`_end_stalled`)."""
    step: asyncio.Future[Any] | None = None
    call = asyncio.current_task()
    assert call is not None
    try:
        while True:
            step = asyncio.ensure_future(asyncio.to_thread(next, items, _DONE))
            item = await asyncio.shield(step)
            if item is _DONE:
                return
            stalled = asyncio.get_running_loop().call_later(idle_seconds, _end_stalled, context, call, idle_seconds)
            try:
                yield item
            finally:
                stalled.cancel()
    finally:
        if step is not None and not step.done():  # the caller went away mid-step: let the step end first
            await asyncio.wait([step])
        items.close()


def _end_stalled(context: grpc.aio.ServicerContext, call: asyncio.Task[Any], idle_seconds: float) -> None:
    """End a call whose reader stopped reading. Cancelling its task alone frees the session, but grpcio
    then sends no status (it takes a cancelled handler for a caller that went away), so the reader would
    wait for its own deadline, holding the call open: the status is sent first, queued behind the parts
    the reader has yet to take, then the handler, stuck in its write, is cancelled."""
    stalled = Unavailable(f"the export's reader took no part for {idle_seconds:g} s (stream_idle_seconds), so "
                          "the server ended it; export again, reading as parts arrive",
                          reason=Reason.EXPORT_STALLED)

    async def send_status() -> None:
        with contextlib.suppress(grpc.aio.AbortError, grpc.aio.UsageError, RuntimeError):
            await context.abort_with_status(to_status(stalled))

    sending = asyncio.ensure_future(send_status())
    _SENDING.add(sending)  # the loop keeps only a weak reference to a task: one unreferenced may be collected
    sending.add_done_callback(_SENDING.discard)
    asyncio.get_running_loop().call_soon(call.cancel)  # after send_status has handed grpcio the status


async def _next(stream: AsyncIterator[T]) -> T | None:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None


def _proto_part(part: Part) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if part.head is not None:
        head = part.head
        fields["head"] = pb.SessionHead(
            session_id=head.session_id, next_id=head.next_id, first_recent_id=head.first_recent_id,
            start_at_unix_nano=head.start_at, summary_json=head.summary_json,
            summary_cursor=None if head.cursor is None else pb.SummaryCursor(
                message_id=head.cursor.last_id, send_at_unix_nano=head.cursor.send_at),
            recent_messages=head.recent_messages, exported_by=head.exported_by,
            exported_at_unix_nano=head.exported_at, tenant=tenant_of(),
            summary_last_run=None if head.last_run is None else convert.summary_run(head.last_run))
    if part.records:
        fields["messages"] = [pb.ExportedMessage(message=convert.message(record),
                                                 idempotency_key=record.idempotency_key) for record in part.records]
    if part.end is not None:
        fields["end"] = pb.ExportEnd(messages=part.end.messages, last_id=part.end.last_id, sha256=part.end.sha256)
    return fields


def _domain_part(request: pb.ImportSessionRequest) -> Part:
    part = Part(records=[Record(id=item.message.id, role=convert.ROLE_NAMES.get(item.message.role, ""),
                                content=item.message.content, send_at=item.message.send_at_unix_nano,
                                sender=item.message.sender, idempotency_key=item.idempotency_key,
                                payload=item.message.payload_json)
                         for item in request.messages])
    if request.HasField("head"):
        head = request.head
        part.head = Head(session_id=head.session_id, next_id=head.next_id, first_recent_id=head.first_recent_id,
                         start_at=head.start_at_unix_nano, summary_json=head.summary_json,
                         cursor=Cursor(head.summary_cursor.message_id, head.summary_cursor.send_at_unix_nano)
                         if head.HasField("summary_cursor") else None,
                         last_run=convert.run_of(head.summary_last_run, "head.summary_last_run")
                         if head.HasField("summary_last_run") else None,
                         recent_messages=head.recent_messages, exported_by=head.exported_by,
                         exported_at=head.exported_at_unix_nano)
    if request.HasField("end"):
        part.end = End(request.end.messages, request.end.last_id, request.end.sha256)
    return part
