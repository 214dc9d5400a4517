"""The contract as a Connect ASGI application: `POST /memsvc.v1.<Service>/<Method>`.

Owns what the Connect protocol (connectrpc) needs memsvc to decide: the
request size limit and the status of a body that does not decode. JSON (or
binary protobuf) in, the servicer's reply out, errors as Connect error JSON
(`{"code", "message", "details": [ErrorInfo]}`) with the HTTP status the
protocol assigns to each code. Must never hold request logic: calls.py hands
each call to its servicer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from connectrpc._protocol import HTTPException
from connectrpc.errors import ConnectError
from connectrpc.server import ConnectASGIApplication
from google.protobuf.json_format import ParseError
from google.protobuf.message import DecodeError

from memsvc.core.errors import MemsvcError, ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.http import calls
from memsvc.http.gate import Gate
from memsvc.rpc.malformed import undecodable
from memsvc.rpc.status import to_status

log = logging.getLogger(__name__)


def _too_large(limit: int) -> ConnectError:
    return calls.connect_error(to_status(ResourceExhausted(
        f"the request is larger than max_request_bytes ({limit} bytes); send less per call",
        reason=Reason.REQUEST_TOO_LARGE)))


class Contract(ConnectASGIApplication[Mapping[str, object]]):
    """Every unary RPC of the given servicers (service full name -> servicer)."""

    path = "/"

    def __init__(self, servicers: Mapping[str, object], gate: Gate, max_request_bytes: int):
        # Built now, not at the first request: a method calls.py cannot serve stops the start.
        routes = calls.endpoints(servicers, gate)
        # No compression: connectrpc inflates a gzip body whole, on the event loop, before any size check.
        super().__init__(service=servicers, endpoints=lambda _: routes, read_max_bytes=max_request_bytes,
                         compressions=())
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") != "POST":
            # Connect lets side-effect-free methods be called with GET, the request in the URL: memsvc
            # refuses it, since a query string carries conversation text into proxy and access logs.
            refused = HTTPException(HTTPStatus.METHOD_NOT_ALLOWED, [("Allow", "POST")])
            await self._handle_error(refused, None, send)
            return
        await super().__call__(scope, self._limited(scope, receive), send)

    async def refuse(self, error: MemsvcError, send: Any) -> None:
        """Answer with `error` as a Connect error, whatever was asked."""
        await self._handle_error(calls.connect_error(to_status(error)), None, send)

    def _limited(self, scope: Any, receive: Any) -> Any:
        """`receive`, refusing a body past max_request_bytes as soon as its length or its bytes say so,
        not after buffering all of it."""
        limit = self.max_request_bytes
        declared = dict(scope.get("headers", ())).get(b"content-length", b"0")
        received = 0

        async def limited() -> Any:
            nonlocal received
            if declared.isdigit() and int(declared) > limit:
                raise _too_large(limit)
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise _too_large(limit)
            return message

        return limited

    async def _handle_error(self, exc: Exception, ctx: Any, send: Any) -> None:
        # connectrpc (0.9, pinned) answers any exception but its own as code unknown (HTTP 500). A body
        # that does not decode is the caller's mistake and gets what gRPC gives it, INVALID_ARGUMENT
        # MALFORMED_REQUEST; anything else is ours, INTERNAL, never UNKNOWN.
        if isinstance(exc, (ParseError, DecodeError, UnicodeDecodeError)):
            exc = calls.connect_error(to_status(undecodable(exc)))
        elif not isinstance(exc, (ConnectError, HTTPException)):
            log.error("unexpected error in the HTTP listener", exc_info=exc)
            exc = calls.connect_error(to_status(MemsvcError(
                "internal error in the HTTP listener; the server log has the details", reason=Reason.INTERNAL)))
        await super()._handle_error(exc, ctx, send)
