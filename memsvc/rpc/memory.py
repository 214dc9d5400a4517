"""MemoryService: translates the per-session memory RPCs to domain calls.

Only quick, bounded work runs on the event loop. What waits (an archive
commit, an LLM or embedding call, the disk) runs on a worker thread, and
searches, which compute, on the `searches` pool (offload.py) or where
`Searcher.placement` says, together with the conversion of their requests
and replies. Where an Append runs is the domain's choice
(`Appender.submit`): this module only converts its messages.
"""

from __future__ import annotations

import asyncio

import grpc

from memsvc.app import App
from memsvc.rpc import convert
from memsvc.rpc.access import serving
from memsvc.rpc.deadlines import deadline_of
from memsvc.rpc.offload import FairPool
from memsvc.rpc.status import translated
from memsvc.window.appender import AppendResult
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc


def _acknowledged(result: AppendResult) -> pb.AppendResponse:
    # Without contents, the reply is always far smaller than the request: a stored Append is never
    # refused for the size of its reply.
    return pb.AppendResponse(messages=[convert.message(record, with_content=False) for record in result.records],
                             replayed=result.replayed)


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, app: App, searches: FairPool):
        self.app = app
        self.searches = searches

    @translated
    async def Append(self, request: pb.AppendRequest, context: grpc.aio.ServicerContext) -> pb.AppendResponse:
        result = await serving(self.app).appender.submit(
            request.session_id, lambda: [convert.new_message(message) for message in request.messages],
            len(request.messages), request.idempotency_key, deadline_of(context))
        return _acknowledged(result)

    @translated
    async def GetContext(self, request: pb.GetContextRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetContextResponse:
        contexts = serving(self.app).contexts
        if contexts.may_wait(request.request_text):
            turn = await asyncio.to_thread(contexts.for_turn, request.session_id, request.request_text,
                                           request.omit_payloads)
        else:
            turn = contexts.for_turn(request.session_id, request.request_text, request.omit_payloads)
        reply = pb.GetContextResponse(window=[convert.message(record) for record in turn.window],
                                      omitted_messages=turn.omitted,
                                      older_page_token=str(turn.window[0].id) if turn.omitted else "")
        if turn.summary is not None:
            reply.turn_context.CopyFrom(pb.Message(role=pb.ROLE_USER, content=turn.text))
            reply.summary.CopyFrom(convert.summary(turn.summary))
        return reply

    @translated
    async def GetSummary(self, request: pb.GetSummaryRequest,
                         context: grpc.aio.ServicerContext) -> pb.GetSummaryResponse:
        stored = serving(self.app).contexts.stored(request.session_id)
        reply = pb.GetSummaryResponse(cursor_unix_nano=stored.cursor_at)
        if stored.summary is not None:
            reply.summary.CopyFrom(convert.summary(stored.summary))
        if stored.last_run is not None:
            reply.last_run.CopyFrom(convert.summary_run(stored.last_run))
        return reply

    @translated
    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        infos, token = await asyncio.to_thread(serving(self.app).lister.list_page, request.page_size,
                                               request.page_token, request.session_id_contains)
        return pb.ListSessionsResponse(sessions=[convert.session_info(info) for info in infos],
                                       next_page_token=token)

    @translated
    async def ListMessages(self, request: pb.ListMessagesRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListMessagesResponse:
        transcript = serving(self.app).transcript  # here: other threads do not know the call's tenant

        # Reads the archive and converts up to max_reply_bytes of text: off the event loop.
        def page() -> pb.ListMessagesResponse:
            found = transcript.page(request.session_id, request.page_size, request.page_token, request.newest_first,
                                    request.omit_payloads)
            return pb.ListMessagesResponse(messages=[convert.message(record) for record in found.records],
                                           next_page_token=found.next_token)

        return await asyncio.to_thread(page)

    @translated
    async def Search(self, request: pb.SearchRequest, context: grpc.aio.ServicerContext) -> pb.SearchResponse:
        query = convert.query(request)
        searcher = serving(self.app).searcher  # here: the search pool's threads do not know the call's tenant

        def search() -> pb.SearchResponse:
            results = searcher.search(query)
            return pb.SearchResponse(hits=[convert.hit(hit) for hit in results.hits], unsearched=results.unsearched,
                                     omitted_hits=results.omitted)

        placement = searcher.placement(query)
        if placement == "loop":
            return search()
        if placement == "thread":  # an embedding endpoint or an index to load: not the pool's turn
            return await asyncio.to_thread(search)
        return await self.searches.run(query.session_id, search)

    @translated
    async def Compact(self, request: pb.CompactRequest, context: grpc.aio.ServicerContext) -> pb.CompactResponse:
        # Waits for an archive commit: off the event loop.
        result = await asyncio.to_thread(serving(self.app).compaction.compact, request.session_id,
                                         deadline_of(context))
        return pb.CompactResponse(removed=result.removed, start_at_unix_nano=result.start_at)

    @translated
    async def Summarize(self, request: pb.SummarizeRequest,
                        context: grpc.aio.ServicerContext) -> pb.SummarizeResponse:
        # LLM calls: off the event loop.
        result = await asyncio.to_thread(serving(self.app).summarizer.summarize, request.session_id,
                                         deadline_of(context))
        reply = pb.SummarizeResponse(count=result.count)
        if result.summary is not None:
            reply.summary.CopyFrom(convert.summary(result.summary))
        return reply

    @translated
    async def Reset(self, request: pb.ResetRequest, context: grpc.aio.ServicerContext) -> pb.ResetResponse:
        mode = convert.enum_name(request.mode, convert.RESET_MODES, "mode")
        deleted = await asyncio.to_thread(serving(self.app).clearing.reset, request.session_id, mode == "summary",
                                          deadline_of(context))
        return pb.ResetResponse(deleted=convert.deleted(deleted))

    @translated
    async def RemoveSession(self, request: pb.RemoveSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.RemoveSessionResponse:
        deleted = await asyncio.to_thread(serving(self.app).clearing.remove, request.session_id,
                                          deadline_of(context))
        return pb.RemoveSessionResponse(deleted=convert.deleted(deleted))

    @translated
    async def DeleteMessages(self, request: pb.DeleteMessagesRequest,
                             context: grpc.aio.ServicerContext) -> pb.DeleteMessagesResponse:
        deadline, clearing = deadline_of(context), serving(self.app).clearing

        def delete() -> pb.DeleteMessagesResponse:
            result = clearing.delete_messages(request.session_id, list(request.ids), request.last, deadline)
            return pb.DeleteMessagesResponse(messages=[convert.message(record) for record in result.records],
                                             deleted=convert.deleted(result.deleted),
                                             contents_omitted=result.contents_omitted)

        return await asyncio.to_thread(delete)

    @translated
    async def ReplaceMessages(self, request: pb.ReplaceMessagesRequest,
                              context: grpc.aio.ServicerContext) -> pb.ReplaceMessagesResponse:
        deadline, tenant = deadline_of(context), serving(self.app)
        expected = request.expected_last_id if request.HasField("expected_last_id") else None

        # Rewrites history.json and waits for archive commits: off the event loop.
        def replace() -> pb.ReplaceMessagesResponse:
            prepared = tenant.appender.prepare(request.session_id, [convert.new_message(message)
                                                                    for message in request.messages],
                                               request.idempotency_key, replacing=True)
            replacement = tenant.clearing.replace(prepared, expected, deadline)
            acknowledged = _acknowledged(replacement.result)
            return pb.ReplaceMessagesResponse(messages=acknowledged.messages, replayed=acknowledged.replayed,
                                              deleted=convert.deleted(replacement.deleted))

        return await asyncio.to_thread(replace)
