"""Property-based bad input through one real server (and, for error memory,
one keeping its lessons in PostgreSQL too): every reply is a documented
status, the server stays up, and data it did not accept to change stays as
it was. The invariants are checked after every example, so the first input
that breaks one is the one Hypothesis reports."""

from __future__ import annotations

import json
import re

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc.core.ids import is_session_id
from memsvc.core.layout import TenantLayout
from memsvc_client.v1 import error_memory_pb2 as epb
from memsvc_client.v1 import error_memory_pb2_grpc, fit_pb2_grpc, memory_pb2_grpc
from memsvc_client.v1 import fit_pb2 as fpb
from memsvc_client.v1 import memory_pb2 as pb
from tests.support import ServerProcess
from tests.support.lessons import PostgresBackend

DOCUMENTED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED}
PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
CANARY = "canary"
EXAMPLES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

nasty_ids = st.sampled_from(["", ".", "..", "../x", "a/b", "/etc/passwd", "a\x00b", "-x", ".store", "x" * 129,
                             "x" * 10_000, "caf\u00e9", "\u6c99\u76d2", "a b", "sessions", "s\n", "%2e%2e"])
session_ids = st.one_of(nasty_ids, st.text(max_size=200), st.from_regex(PLAIN_ID, fullmatch=True)).filter(
    lambda value: value != CANARY)
int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)
uint32s = st.integers(min_value=0, max_value=2**32 - 1)
int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
texts = st.one_of(st.text(max_size=300), st.sampled_from(["", " ", "\x00", "x" * 1_100_000]))


class Live:
    """One server for every example, and the invariants no input may break."""

    def __init__(self, server: ServerProcess):
        self.server = server
        self.channel = grpc.insecure_channel(server.tcp)
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)
        self.errors = error_memory_pb2_grpc.ErrorMemoryServiceStub(self.channel)
        self.fit = fit_pb2_grpc.FitServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.memory.Append(pb.AppendRequest(session_id=CANARY,
                                            messages=[pb.Message(role=pb.ROLE_USER, content="keep me")]))
        self.canary = self._canary()
        self.top = sorted(path.name for path in server.data_dir.parent.iterdir())
        "What lies beside the data directory: nothing an id names may appear there."

    def _canary(self) -> bytes:
        return (self.server.data_dir / "sessions" / CANARY / "history.json").read_bytes()

    def check(self) -> None:
        """The canary session is untouched, every directory in sessions/ is one the layout gives an id, nothing
        appeared beside the data directory, and the server still serves."""
        assert self._canary() == self.canary
        sessions = TenantLayout("default", self.server.data_dir / "sessions", self.server.data_dir / ".store")
        strays = [path.name for path in sessions.sessions_dir.iterdir()
                  if not path.name.startswith(".") and sessions.session_id(path) is None]
        assert not strays
        assert sorted(path.name for path in self.server.data_dir.parent.iterdir()) == self.top
        status = self.health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("properties") / "data", "--max-request-bytes", "3000000").start()
    checked = Live(server)
    yield checked
    checked.channel.close()
    server.kill()


def status_of(call, request) -> grpc.StatusCode:
    try:
        call(request, timeout=30)
    except grpc.RpcError as error:
        assert error.code() in DOCUMENTED, (error.code(), error.details())
        return error.code()
    return grpc.StatusCode.OK


payloads = st.one_of(st.text(max_size=300), st.sampled_from([
    "", "{}", '{"a": [1, 2.5e300, null]}', "[" * 5000, '"\\ud800"', "1e999", '{"x": "' + "y" * 1_100_000 + '"}']))
messages = st.builds(pb.Message, role=int32s, content=texts, sender=st.text(max_size=300),
                     send_at_unix_nano=int64s, id=st.integers(min_value=0, max_value=2**64 - 1), payload_json=payloads)


@EXAMPLES
@given(session_id=session_ids, batch=st.lists(messages, max_size=4), key=st.text(max_size=300))
def test_append(live, session_id, batch, key):
    code = status_of(live.memory.Append, pb.AppendRequest(session_id=session_id, messages=batch, idempotency_key=key))
    if not is_session_id(session_id):
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)  # size is checked first
    live.check()


@EXAMPLES
@given(session_id=session_ids, text=texts, mode=int32s, page_size=uint32s, token=st.text(max_size=200))
def test_session_rpcs(live, session_id, text, mode, page_size, token):
    memory = live.memory
    status_of(memory.GetContext, pb.GetContextRequest(session_id=session_id, request_text=text))
    status_of(memory.GetSummary, pb.GetSummaryRequest(session_id=session_id))
    status_of(memory.Compact, pb.CompactRequest(session_id=session_id))
    status_of(memory.Reset, pb.ResetRequest(session_id=session_id, mode=mode))
    status_of(memory.Summarize, pb.SummarizeRequest(session_id=session_id))
    status_of(memory.ListSessions, pb.ListSessionsRequest(page_size=page_size, page_token=token))
    status_of(memory.ListMessages, pb.ListMessagesRequest(session_id=session_id, page_size=page_size,
                                                          page_token=token, newest_first=mode % 2 == 0))
    status_of(memory.DeleteMessages, pb.DeleteMessagesRequest(session_id=session_id, last=page_size))
    status_of(memory.DeleteMessages, pb.DeleteMessagesRequest(session_id=session_id, ids=[page_size, 2**64 - 1]))
    status_of(memory.RemoveSession, pb.RemoveSessionRequest(session_id=session_id))
    live.check()


@EXAMPLES
@given(session_id=st.one_of(st.just("target"), session_ids), query=texts, match=int32s, limit=uint32s,
       time_range=int32s, since=int64s, until=int64s, include_window=st.booleans(),
       vector=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=8))
def test_search(live, session_id, query, match, limit, time_range, since, until, include_window, vector):
    live.memory.Append(pb.AppendRequest(session_id="target", messages=[pb.Message(role=1, content="the sandbox")]))
    status_of(live.memory.Search, pb.SearchRequest(
        session_id=session_id, query=query, match=match, limit=limit, time_range=time_range,
        since_unix_nano=since, until_unix_nano=until, include_window=include_window, query_embedding=vector))
    live.check()


@pytest.fixture(scope="module")
def live_postgres(postgres, tmp_path_factory):
    """A server keeping its lessons in PostgreSQL, whose text columns and indexes refuse what SQLite takes."""
    database = postgres.create_database()
    server = ServerProcess(tmp_path_factory.mktemp("properties-postgres") / "data",
                           *PostgresBackend(postgres, database).server_args).start()
    channel = grpc.insecure_channel(server.tcp)
    health = health_pb2_grpc.HealthStub(channel)
    yield error_memory_pb2_grpc.ErrorMemoryServiceStub(channel), health
    channel.close()
    server.kill()
    postgres.drop_database(database)


ERROR_MEMORY_FIELDS = {
    "tool": texts, "keywords": st.lists(st.text(max_size=50), max_size=5), "symptom": texts, "cause": texts,
    "action": texts, "outcome": int32s, "session_id": st.text(max_size=200), "limit": uint32s,
    "record_id": st.text(max_size=100), "page_size": uint32s, "token": st.text(max_size=100)}


def error_memory_calls(errors, tool, keywords, symptom, cause, action, outcome, session_id, limit, record_id,
                       page_size, token):
    status_of(errors.RecordError, epb.RecordErrorRequest(tool_name=tool, keywords=keywords, symptom=symptom,
                                                         cause=cause, action=action, outcome=outcome,
                                                         session_id=session_id))
    status_of(errors.LookupErrors, epb.LookupErrorsRequest(tool_name=tool, error_text=symptom, limit=limit))
    status_of(errors.SearchErrors, epb.SearchErrorsRequest(query=symptom, limit=limit))
    status_of(errors.ListErrors, epb.ListErrorsRequest(page_size=page_size, page_token=token, tool_name=tool))
    status_of(errors.UpdateErrorAction, epb.UpdateErrorActionRequest(id=record_id, action=action))
    status_of(errors.DeleteError, epb.DeleteErrorRequest(id=record_id))


@EXAMPLES
@given(**ERROR_MEMORY_FIELDS)
def test_error_memory(live, **fields):
    error_memory_calls(live.errors, **fields)
    live.check()


@EXAMPLES
@given(**ERROR_MEMORY_FIELDS)
def test_error_memory_on_postgres(live_postgres, **fields):
    errors, health = live_postgres
    error_memory_calls(errors, **fields)
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == health_pb2.HealthCheckResponse.SERVING


METHODS = [f"/memsvc.v1.MemoryService/{name}" for name in pb.DESCRIPTOR.services_by_name["MemoryService"]
           .methods_by_name] + [f"/memsvc.v1.ErrorMemoryService/{name}" for name in
                                epb.DESCRIPTOR.services_by_name["ErrorMemoryService"].methods_by_name]
METHODS += [f"/memsvc.v1.FitService/{name}" for name in fpb.DESCRIPTOR.services_by_name["FitService"].methods_by_name]


@EXAMPLES
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=300))
def test_raw_bytes_on_the_wire(live, method, payload):
    call = live.channel.unary_unary(method, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw)
    status_of(call, payload)
    live.check()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=10)
chat_fields = st.dictionaries(st.sampled_from(["tool_calls", "tool_call_id", "name", "function_call", "x-extra"]),
                              json_values, max_size=3)
chat_messages = st.one_of(
    texts, json_values.map(json.dumps),
    st.builds(lambda role, content, fields: json.dumps({"role": role, "content": content, **fields}),
              st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot", ""]),
              json_values, chat_fields))


@EXAMPLES
@given(session_id=st.one_of(st.just("target"), session_ids), vendor=st.text(max_size=40), model=st.text(max_size=60),
       batch=st.lists(chat_messages, max_size=6), overflow=st.booleans(), previous=st.text(max_size=20),
       window=uint32s, reserved=uint32s)
def test_fit_context(live, session_id, vendor, model, batch, overflow, previous, window, reserved):
    status_of(live.fit.FitContext, fpb.FitContextRequest(
        session_id=session_id, vendor=vendor, model=model, messages=batch, overflow=overflow, previous_model=previous,
        context_window=window, reserved_tokens=reserved))
    live.check()
