"""ErrorMemoryService: translates the cross-session lesson RPCs to domain calls.

Domain calls run in a worker thread: a lesson write waits for an fsync and a
lookup may wait for an embedding provider, and neither may stall the event
loop that serves every other RPC.
"""

from __future__ import annotations

import asyncio

import grpc

from memsvc.app import App
from memsvc.lessons.model import Lesson, NewLesson
from memsvc.rpc.access import serving
from memsvc.rpc.convert import enum_name
from memsvc.rpc.status import translated
from memsvc_client.v1 import error_memory_pb2 as pb
from memsvc_client.v1 import error_memory_pb2_grpc

OUTCOME_NAMES = {pb.OUTCOME_UNSPECIFIED: "", pb.OUTCOME_RESOLVED: "resolved", pb.OUTCOME_FAILED: "failed",
                 pb.OUTCOME_ABANDONED: "abandoned"}


def error_record(lesson: Lesson) -> pb.ErrorRecord:
    return pb.ErrorRecord(id=lesson.id, tool_name=lesson.tool_name, keywords=lesson.keywords,
                          symptom=lesson.symptom, cause=lesson.cause, action=lesson.action,
                          outcome=pb.OUTCOME_RESOLVED, session_id=lesson.session_id,
                          created_at_unix_nano=lesson.created_at, last_hit_unix_nano=lesson.last_hit,
                          expires_at_unix_nano=lesson.expires_at, hit_count=lesson.hit_count)


class ErrorMemoryServicer(error_memory_pb2_grpc.ErrorMemoryServiceServicer):
    def __init__(self, app: App):
        self.app = app

    @translated
    async def RecordError(self, request: pb.RecordErrorRequest,
                          context: grpc.aio.ServicerContext) -> pb.RecordErrorResponse:
        outcome = enum_name(request.outcome, OUTCOME_NAMES, "outcome")
        new = NewLesson(tool_name=request.tool_name, symptom=request.symptom, outcome=outcome,
                        action=request.action, cause=request.cause, keywords=list(request.keywords),
                        session_id=request.session_id)
        result = await asyncio.to_thread(serving(self.app).lessons.record, new)
        reply = pb.RecordErrorResponse(stored=result.stored, refreshed=result.refreshed, detail=result.detail)
        if result.lesson is not None:
            reply.record.CopyFrom(error_record(result.lesson))
        return reply

    @translated
    async def LookupErrors(self, request: pb.LookupErrorsRequest,
                           context: grpc.aio.ServicerContext) -> pb.LookupErrorsResponse:
        related = await asyncio.to_thread(serving(self.app).lessons.lookup, request.tool_name, request.error_text,
                                          request.limit)
        return pb.LookupErrorsResponse(records=[error_record(lesson) for lesson in related.lessons],
                                       related_errors=related.related_errors)

    @translated
    async def SearchErrors(self, request: pb.SearchErrorsRequest,
                           context: grpc.aio.ServicerContext) -> pb.SearchErrorsResponse:
        found = await asyncio.to_thread(serving(self.app).lessons.search, request.query, request.limit)
        return pb.SearchErrorsResponse(records=[error_record(lesson) for lesson in found])

    @translated
    async def ListErrors(self, request: pb.ListErrorsRequest,
                         context: grpc.aio.ServicerContext) -> pb.ListErrorsResponse:
        page, token = await asyncio.to_thread(serving(self.app).lessons.list_page, request.page_size,
                                              request.page_token, request.tool_name)
        return pb.ListErrorsResponse(records=[error_record(lesson) for lesson in page], next_page_token=token)

    @translated
    async def UpdateErrorAction(self, request: pb.UpdateErrorActionRequest,
                                context: grpc.aio.ServicerContext) -> pb.UpdateErrorActionResponse:
        lesson = await asyncio.to_thread(serving(self.app).lessons.update_action, request.id, request.action)
        return pb.UpdateErrorActionResponse(record=error_record(lesson))

    @translated
    async def DeleteError(self, request: pb.DeleteErrorRequest,
                          context: grpc.aio.ServicerContext) -> pb.DeleteErrorResponse:
        lesson = await asyncio.to_thread(serving(self.app).lessons.delete, request.id)
        return pb.DeleteErrorResponse(record=error_record(lesson))
