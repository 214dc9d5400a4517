"""An OTLP/HTTP traces receiver on loopback, as a collector would be: it decodes every
ExportTraceServiceRequest (opentelemetry-proto) and keeps the spans and the raw bodies.

Run as a program (`python -m tests.support.otlp_receiver`), it prints its endpoint, receives until its
standard input closes, then prints how many spans it got: benchmarks run it so, in a process of its own,
so that decoding spans never takes the benchmark's GIL.
"""

from __future__ import annotations

import gzip
import sys
import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.loopback import JSONHandler, Loopback

TRACES_PATH = "/v1/traces"


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, object]
    status: int


class Receiver(Loopback):
    """An OTLP/HTTP traces endpoint (POST /v1/traces, application/x-protobuf) keeping every span and every body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())
        self.endpoint = f"{self.base_url}{TRACES_PATH}"

    def _keep(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = [Span(span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.kind,
                      {attribute.key: _value(attribute.value) for attribute in span.attributes}, span.status.code)
                 for resource in request.resource_spans for scope in resource.scope_spans for span in scope.spans]
        with self._lock:
            self.bodies.append(body)
            self.spans += found

    def named(self, name: str) -> list[Span]:
        with self._lock:
            return [span for span in self.spans if span.name == name]

    def children(self, parent: Span, name: str) -> list[Span]:
        return [span for span in self.named(name)
                if span.parent_id == parent.span_id and span.trace_id == parent.trace_id]

    def _handler(self) -> type[JSONHandler]:
        receiver = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != TRACES_PATH or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.answer(404, b"{}")
                    return
                receiver._keep(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        return Handler


def _value(value) -> object:  # an AnyValue
    return getattr(value, value.WhichOneof("value"))


if __name__ == "__main__":
    with Receiver() as running:
        print(running.endpoint, flush=True)
        sys.stdin.read()
        print(len(running.spans), flush=True)
