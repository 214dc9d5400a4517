"""Traces end to end: a real `memsvc serve` process with tracing_endpoint set exports its spans over OTLP/HTTP
to a receiver this module runs on loopback, which decodes each ExportTraceServiceRequest with the
opentelemetry-proto package, as a collector would; a chat-completions stand-in plays the summary and
decision models. Checked: the spans' names, their parents across the journal's, the embedder's and the
search pool's threads, their attributes, and that neither message text nor a raw session id leaves the
server in any of them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.proto.trace.v1.trace_pb2 import Status as StatusProto

from memsvc.core import config
from memsvc.core.errors import InvalidSetting
from memsvc.runtime.tracing import session_hash
from memsvc_client import MemsvcError
from memsvc_client.v1 import memory_pb2, memory_pb2_grpc
from tests.support import ROOT, curl, free_port, wait_for
from tests.support.llm_server import Request, summary_reply
from tests.support.otlp_receiver import Receiver

SESSION = "alice-private-session-7f3"
SECRET_WORDS = ("zanzibar", "quokka", "marmalade")
"Words only the messages hold: no span may carry them."
TRACE_ID, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def judge(request: Request) -> str:
    """The decision model: the relevance check keeps everything; the noise filter drops nothing."""
    if "Request:" in request.user:
        return '{"key_decisions": [1], "past_discussions": [], "current_discussion": true}'
    return '{"noise": []}'


def llm_flags(base_url: str) -> list[str]:
    return ["--llm-base-url", base_url, "--summary-model", "sum", "--decision-model", "judge",
            "--llm-max-retries", "0"]


def test_every_rpc_and_its_stages_are_spans_in_one_trace_each_without_text_or_session_ids(
        make_server, receiver, llm_server):
    server = make_server("--tracing-endpoint", receiver.endpoint, *llm_flags(llm_server.base_url))
    llm_server.script("judge", *[judge] * 8)
    llm_server.script("sum", *[summary_reply(["Do: keep answers short"], topic="travel")] * 8)
    older = [{"role": ("user", "assistant")[n % 2], "content": f"{SECRET_WORDS[n % 3]} trip day {n} " + "word " * 300}
             for n in range(4)]
    with server.client() as client:
        client.append(SESSION, [(turn["role"], turn["content"]) for turn in older])
        client.append(SESSION, [("user", f"Book the {SECRET_WORDS[1]} tour"), ("assistant", "Booked.")])
        hits = client.search(SESSION, f"{SECRET_WORDS[0]} trip", match="hybrid", include_window=True)
        assert hits.hits
        fitted = client.fit_context(SESSION, "openai", "gpt-4o",
                                    [*older, {"role": "user", "content": f"and the {SECRET_WORDS[2]} jar?"}],
                                    context_window=1200)
        assert [stage.stage for stage in fitted.stages][:2] == ["check_threshold", "extract_old_histories"]
        client.append(SESSION, [("user", f"Pack the {SECRET_WORDS[0]} map"), ("assistant", "Packed.")])
        client.summarize(SESSION, timeout=30)
        context = client.get_context(SESSION, request_text=f"what about the {SECRET_WORDS[2]}?")
        assert context.summary is not None
        # Once the embedding worker has stored the vectors (its span is exported within the batch delay), a
        # hybrid search runs on the server's search pool, whose threads are the server's own.
        wait_for(lambda: receiver.named("vectors.embed"))
        assert client.search(SESSION, f"{SECRET_WORDS[1]} tour", match="hybrid", include_window=True).hits
        with pytest.raises(MemsvcError) as refused:
            client.search(SESSION, "   ", match="hybrid")
        assert refused.value.reason == "EMPTY_QUERY"
    # A caller's own trace continues into the server's span (W3C traceparent in the call's metadata).
    with grpc.insecure_channel(server.tcp) as channel:
        memory_pb2_grpc.MemoryServiceStub(channel).GetSummary(
            memory_pb2.GetSummaryRequest(session_id=SESSION), metadata=[("traceparent",
                                                                         f"00-{TRACE_ID}-{CALLER_SPAN}-01")])
    assert server.terminate() == 0  # a stop exports the spans still held

    hashed = session_hash(SESSION)
    appends = receiver.named("Append")
    assert len(appends) == 3
    for append in appends:
        assert append.kind == SpanProto.SPAN_KIND_SERVER and append.parent_id == ""
        assert append.attributes == {"rpc.system": "grpc", "rpc.service": "memsvc.v1.MemoryService",
                                     "rpc.method": "Append", "rpc.grpc.status_code": 0, "memsvc.status": "OK",
                                     "memsvc.tenant": "default", "memsvc.session": hashed}
        # The journal's sync, on whichever thread wrote it, is in each Append's trace.
        [sync] = receiver.children(append, "journal.sync")
        assert sync.attributes["frames"] >= 1
    # The embedding worker's batch reports to the Append that handed it the messages.
    embeds = receiver.named("vectors.embed")
    assert embeds and all(span.parent_id in {append.span_id for append in appends} for span in embeds)

    searches = receiver.named("Search")
    [refused_search] = [search for search in searches if search.status == StatusProto.STATUS_CODE_ERROR]
    assert len(searches) == 3
    for search in searches:
        if search is not refused_search:
            for stage in ("search.keyword", "search.semantic", "search.fusion"):
                assert len(receiver.children(search, stage)) == 1, stage
            [semantic] = receiver.children(search, "search.semantic")
            assert len(receiver.children(semantic, "embed.query")) == 1
    assert refused_search.status == StatusProto.STATUS_CODE_ERROR
    assert (refused_search.attributes["rpc.grpc.status_code"], refused_search.attributes["memsvc.reason"]) == (
        grpc.StatusCode.INVALID_ARGUMENT.value[0], "EMPTY_QUERY")
    assert not [span for span in receiver.spans if span.trace_id == refused_search.trace_id
                and span is not refused_search]

    [summarize] = receiver.named("Summarize")
    [generate] = receiver.children(summarize, "summary.generate")
    assert {call.attributes["llm.model"] for call in receiver.children(generate, "llm.complete")} == {"sum", "judge"}

    [get_context] = receiver.named("GetContext")
    [relevance] = receiver.children(get_context, "summary.relevance")
    [judged] = receiver.children(relevance, "llm.complete")
    assert judged.attributes == {"llm.model": "judge"}

    [fit] = receiver.named("FitContext")
    assert fit.attributes["memsvc.session"] == hashed
    assert len(receiver.children(fit, "fit.check_threshold")) == 1
    [extract] = receiver.children(fit, "fit.extract_old_histories")
    [fold] = receiver.children(extract, "summary.fold")
    assert "sum" in [call.attributes["llm.model"] for call in receiver.children(fold, "llm.complete")]

    [continued] = receiver.named("GetSummary")
    assert (continued.trace_id, continued.parent_id) == (TRACE_ID, CALLER_SPAN)

    # Nothing a user said, nor the session's name, is in anything the server sent.
    sent = b"".join(receiver.bodies)
    for secret in (*SECRET_WORDS, SESSION, "trip", "Booked", "Packed"):
        assert secret.encode() not in sent, secret


def test_calls_over_http_json_are_spans_as_grpc_calls_are(make_server, receiver):
    server = make_server("--tracing-endpoint", receiver.endpoint, "--http-listen", "127.0.0.1:0")
    base = f"http://{server.http}"
    words = {"role": "ROLE_USER", "content": f"the {SECRET_WORDS[0]} list"}
    assert curl.post(base, "MemoryService/Append", {"session_id": SESSION, "messages": [words]}).status == 200
    refused = curl.post(base, "MemoryService/Search", {"session_id": SESSION, "query": "  "})
    assert (refused.code, refused.reason) == ("invalid_argument", "EMPTY_QUERY")
    exported = curl.stream(base, "ShardService/ExportSession", [{"sessionId": SESSION}])
    assert exported.status == 200 and exported.end == {}
    continued = curl.post(base, "MemoryService/GetSummary", {"session_id": SESSION},
                          options=("-H", f"traceparent: 00-{TRACE_ID}-{CALLER_SPAN}-01"))
    assert continued.status == 200
    assert server.terminate() == 0

    service = {"rpc.system": "connect_rpc", "rpc.service": "memsvc.v1.MemoryService",
               "memsvc.session": session_hash(SESSION)}
    [append] = receiver.named("Append")
    assert append.kind == SpanProto.SPAN_KIND_SERVER and append.parent_id == ""
    assert append.attributes == {**service, "rpc.method": "Append", "memsvc.status": "OK", "memsvc.tenant": "default"}
    [sync] = receiver.children(append, "journal.sync")
    assert sync.attributes["frames"] >= 1
    [search] = receiver.named("Search")
    assert search.status == StatusProto.STATUS_CODE_ERROR
    assert search.attributes == {**service, "rpc.method": "Search", "memsvc.tenant": "default",
                                 "memsvc.status": "INVALID_ARGUMENT", "memsvc.reason": "EMPTY_QUERY",
                                 "rpc.connect_rpc.error_code": "invalid_argument"}
    [export] = receiver.named("ExportSession")
    assert export.attributes["memsvc.status"] == "OK" and export.status != StatusProto.STATUS_CODE_ERROR
    [summary] = receiver.named("GetSummary")
    assert (summary.trace_id, summary.parent_id) == (TRACE_ID, CALLER_SPAN)
    sent = b"".join(receiver.bodies)
    for secret in (SECRET_WORDS[0], SESSION):
        assert secret.encode() not in sent, secret


def test_an_unreachable_receiver_costs_spans_never_a_call(make_server):
    server = make_server("--tracing-endpoint", f"http://127.0.0.1:{free_port()}/v1/traces")
    with server.client() as client:
        client.append(SESSION, [("user", "hello")])
        assert [message.content for message in client.get_context(SESSION).window] == ["hello"]
    assert server.terminate() == 0


def test_tracing_off_imports_no_opentelemetry_and_its_helpers_do_nothing():
    program = """
import sys
from memsvc.cli import main  # everything `memsvc serve` imports
from memsvc.runtime import tracing
from memsvc.rpc import server
assert not tracing.enabled()
with tracing.span("stage", count=1) as noted:
    noted.set(more=2)
gathered = tracing.Gathered("work")
gathered.note("key")
with gathered.span("key"):
    pass
assert tracing.carried(print) is print
assert [name for name in sys.modules if name.startswith("opentelemetry")] == []
"""
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("endpoint, words", [
    ("127.0.0.1:4318", "must be an http:// or https:// URL"),
    ("grpc://collector:4317", "must be an http:// or https:// URL"),
    ("http:///v1/traces", "with a host"),
    ("http://collector:port/v1/traces", "bad port"),
])
def test_a_tracing_endpoint_that_is_not_a_url_fails_the_start(endpoint, words):
    with pytest.raises(InvalidSetting, match=words):
        config.load({"tracing_endpoint": endpoint}, environ={})
    assert config.load({}, environ={"MEMSVC_TRACING_ENDPOINT": "https://otel.example:4318/v1/traces"}) \
        .tracing_endpoint == "https://otel.example:4318/v1/traces"


def test_the_session_hash_is_stable_and_never_the_id():
    assert session_hash(SESSION) == session_hash(SESSION) != session_hash(SESSION + "x")
    assert len(session_hash(SESSION)) == 16 and SESSION not in session_hash(SESSION)
    assert json.dumps(session_hash("")) != '""'
