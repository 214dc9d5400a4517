"""ErrorMemoryService: translates the cross-session lesson RPCs to domain calls."""

from __future__ import annotations

import grpc

from ..app import App
from ..errors import Unimplemented
from ..v1 import error_memory_pb2 as pb
from ..v1 import error_memory_pb2_grpc
from .status import translated


class ErrorMemoryServicer(error_memory_pb2_grpc.ErrorMemoryServiceServicer):
    def __init__(self, app: App):
        self.app = app

    @translated
    async def RecordError(self, request: pb.RecordErrorRequest, context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")

    @translated
    async def LookupErrors(self, request: pb.LookupErrorsRequest, context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")

    @translated
    async def SearchErrors(self, request: pb.SearchErrorsRequest, context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")

    @translated
    async def ListErrors(self, request: pb.ListErrorsRequest, context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")

    @translated
    async def UpdateErrorAction(self, request: pb.UpdateErrorActionRequest,
                                context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")

    @translated
    async def DeleteError(self, request: pb.DeleteErrorRequest, context: grpc.aio.ServicerContext) -> None:
        raise Unimplemented("error memory is not implemented yet")
