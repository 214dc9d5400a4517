"""MemoryService: translates the per-session memory RPCs to domain calls.

Only quick, bounded work runs on the event loop. What waits (an archive
commit, an LLM or embedding call, the disk) runs on a worker thread, and
searches, which compute, on the `searches` pool (offload.py), together with
the conversion of their requests and replies; a semantic search over a small
index already in memory is shorter than the hop there and back, and runs on
the loop. A small Append to a session in
memory is written from the loop and awaits the journal's sync
(window/journal.py) without a thread of its own.
"""

from __future__ import annotations

import asyncio

import grpc

from memsvc.app import App
from memsvc.rpc import convert
from memsvc.rpc.offload import FairPool, settled_here
from memsvc.rpc.status import translated
from memsvc.window.appending import AppendResult
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc

QUICK_APPEND_MESSAGES = 8
"Appends of up to this many messages are converted and checked on the event loop (a few microseconds each)."


def _acknowledged(result: AppendResult) -> pb.AppendResponse:
    # Without contents, the reply is always far smaller than the request: a stored Append is never
    # refused for the size of its reply.
    return pb.AppendResponse(messages=[convert.message(record, with_content=False) for record in result.records],
                             replayed=result.replayed)


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, app: App, searches: FairPool):
        self.app = app
        self.searches = searches
        self._journal_write_due = False
        "A write of the journal's waiting frames is scheduled on the event loop."
        self._appending = 0
        "Appends awaiting their result (the event loop's own count: only it changes it)."

    @translated
    async def Append(self, request: pb.AppendRequest, context: grpc.aio.ServicerContext) -> pb.AppendResponse:
        sessions = self.app.sessions
        if len(request.messages) > QUICK_APPEND_MESSAGES:
            # Converting and checking up to max_messages_per_request messages would stall every other call.
            result = await asyncio.to_thread(self._append, request)
        else:
            prepared = sessions.prepare(request.session_id, [convert.new_message(message)
                                                             for message in request.messages],
                                        request.idempotency_key)
            # In memory and free, the session is written from here. A lone Append on a quick disk: the
            # loop syncs the journal itself (no thread hop either way); while others are in flight, or on
            # a slow disk, the journal's thread does, gathering Appends into each sync. Else a worker
            # thread waits for the session.
            here = sessions.journal.quick and not self._appending
            started = sessions.append_nowait(prepared, write_here=here)
            if started is not None and here and not self._journal_write_due:
                self._journal_write_due = True
                asyncio.get_running_loop().call_soon(self._write_journal)
            self._appending += 1
            try:
                result = await (settled_here(started) if started is not None
                                else asyncio.to_thread(sessions.append_prepared, prepared))
            finally:
                self._appending -= 1
        return _acknowledged(result)

    def _write_journal(self) -> None:
        self._journal_write_due = False
        self.app.sessions.journal.write_waiting()

    def _append(self, request: pb.AppendRequest) -> AppendResult:
        messages = [convert.new_message(message) for message in request.messages]
        return self.app.sessions.append(request.session_id, messages, request.idempotency_key)

    @translated
    async def GetContext(self, request: pb.GetContextRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetContextResponse:
        contexts = self.app.contexts
        if contexts.may_wait(request.request_text):
            turn = await asyncio.to_thread(contexts.for_turn, request.session_id, request.request_text)
        else:
            turn = contexts.for_turn(request.session_id, request.request_text)
        reply = pb.GetContextResponse(window=[convert.message(record) for record in turn.window])
        if turn.summary is not None:
            reply.turn_context.CopyFrom(pb.Message(role=pb.ROLE_USER, content=turn.text))
            reply.summary.CopyFrom(convert.summary(turn.summary))
        return reply

    @translated
    async def GetSummary(self, request: pb.GetSummaryRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetSummaryResponse:
        stored = self.app.contexts.stored(request.session_id)
        reply = pb.GetSummaryResponse(cursor_unix_nano=stored.cursor_at)
        if stored.summary is not None:
            reply.summary.CopyFrom(convert.summary(stored.summary))
        return reply

    @translated
    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        infos, token = await asyncio.to_thread(self.app.sessions.list_page, request.page_size, request.page_token,
                                               request.session_id_contains)
        return pb.ListSessionsResponse(sessions=[convert.session_info(info) for info in infos],
                                       next_page_token=token)

    @translated
    async def ListMessages(self, request: pb.ListMessagesRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListMessagesResponse:
        # Reads the archive and converts up to PAGE_BYTES of text: off the event loop.
        def page() -> pb.ListMessagesResponse:
            found = self.app.transcript.page(request.session_id, request.page_size, request.page_token,
                                             request.newest_first)
            return pb.ListMessagesResponse(messages=[convert.message(record) for record in found.records],
                                           next_page_token=found.next_token)

        return await asyncio.to_thread(page)

    @translated
    async def Search(self, request: pb.SearchRequest, context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        query = convert.query(request)

        def search() -> pb.SearchResponse:
            results = self.app.searcher.search(query)
            return pb.SearchResponse(hits=[convert.hit(hit) for hit in results.hits], unsearched=results.unsearched)

        placement = self.app.searcher.placement(query)
        if placement == "loop":
            return search()
        if placement == "thread":  # an embedding endpoint or an index to load: not the pool's turn
            return await asyncio.to_thread(search)
        return await self.searches.run(query.session_id, search)

    @translated
    async def Compact(self, request: pb.CompactRequest, context: grpc.aio.ServicerContext) -> pb.CompactResponse:
        # Waits for an archive commit: off the event loop.
        result = await asyncio.to_thread(self.app.lifecycle.compact, request.session_id)
        return pb.CompactResponse(removed=result.removed, start_at_unix_nano=result.start_at)

    @translated
    async def Summarize(self, request: pb.SummarizeRequest,
                        context: grpc.aio.ServicerContext) -> pb.SummarizeResponse:
        # LLM calls: off the event loop.
        result = await asyncio.to_thread(self.app.summarizer.summarize, request.session_id)
        reply = pb.SummarizeResponse(count=result.count)
        if result.summary is not None:
            reply.summary.CopyFrom(convert.summary(result.summary))
        return reply

    @translated
    async def Reset(self, request: pb.ResetRequest, context: grpc.aio.ServicerContext) -> pb.ResetResponse:
        mode = convert.enum_name(request.mode, convert.RESET_MODES, "mode")
        deleted = await asyncio.to_thread(self.app.lifecycle.reset, request.session_id, mode == "summary")
        return pb.ResetResponse(deleted=convert.deleted(deleted))

    @translated
    async def RemoveSession(self, request: pb.RemoveSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.RemoveSessionResponse:
        deleted = await asyncio.to_thread(self.app.lifecycle.remove, request.session_id)
        return pb.RemoveSessionResponse(deleted=convert.deleted(deleted))

    @translated
    async def DeleteMessages(self, request: pb.DeleteMessagesRequest,
                             context: grpc.aio.ServicerContext) -> pb.DeleteMessagesResponse:
        def delete() -> pb.DeleteMessagesResponse:
            result = self.app.lifecycle.delete_messages(request.session_id, list(request.ids), request.last)
            return pb.DeleteMessagesResponse(messages=[convert.message(record) for record in result.records],
                                             deleted=convert.deleted(result.deleted))

        return await asyncio.to_thread(delete)
