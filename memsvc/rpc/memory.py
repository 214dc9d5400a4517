"""MemoryService: translates the per-session memory RPCs to domain calls."""

from __future__ import annotations

import asyncio

import grpc

from ..app import App
from ..summary import turn_context
from ..v1 import memory_pb2 as pb
from ..v1 import memory_pb2_grpc
from . import convert
from .status import translated

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, app: App):
        self.app = app

    @translated
    async def Append(self, request: pb.AppendRequest, context: grpc.aio.ServicerContext) -> pb.AppendResponse:
        messages = [convert.new_message(message, index) for index, message in enumerate(request.messages)]
        # The fsync waits off the event loop: a slow disk must not stall every other call.
        result = await asyncio.to_thread(self.app.sessions.append, request.session_id, messages,
                                         request.idempotency_key)
        return pb.AppendResponse(messages=[convert.message(record) for record in result.records],
                                 replayed=result.replayed)

    @translated
    async def GetContext(self, request: pb.GetContextRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetContextResponse:
        window = self.app.sessions.window(request.session_id)
        reply = pb.GetContextResponse(window=[convert.message(record) for record in window])
        summary = self.app.sessions.summary(request.session_id)
        if summary is not None and not summary.is_empty() and request.request_text and self.app.judge is not None:
            # A decision-model call: off the event loop.
            summary = await asyncio.to_thread(self.app.judge.relevant, summary, window, request.request_text)
        if summary is not None and not summary.is_empty():
            reply.turn_context.CopyFrom(pb.Message(role=pb.ROLE_USER, content=turn_context(summary)))
            reply.summary.CopyFrom(convert.summary(summary))
        return reply

    @translated
    async def GetSummary(self, request: pb.GetSummaryRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetSummaryResponse:
        session = self.app.sessions.require(request.session_id)
        summary = session.summary()
        cursor = self.app.summarizer.cursor(request.session_id)
        reply = pb.GetSummaryResponse(cursor_unix_nano=cursor.send_at if cursor else 0)
        if summary is not None:
            reply.summary.CopyFrom(convert.summary(summary))
        return reply

    @translated
    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        page_size = min(request.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        infos, token = self.app.sessions.list(page_size, request.page_token)
        return pb.ListSessionsResponse(
            sessions=[pb.SessionInfo(session_id=info.session_id, message_count=info.message_count,
                                     history_bytes=info.history_bytes, last_append_unix_nano=info.last_append,
                                     has_summary=info.has_summary) for info in infos],
            next_page_token=token)

    @translated
    async def Search(self, request: pb.SearchRequest, context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        query = convert.query(request)
        if self.app.searcher.may_wait(query):
            results = await asyncio.to_thread(self.app.searcher.search, query)
        else:
            results = self.app.searcher.search(query)
        return pb.SearchResponse(hits=[convert.hit(hit) for hit in results.hits], unsearched=results.unsearched)

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
