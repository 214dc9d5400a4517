"""Property-based bad input over HTTP/JSON through one real server: arbitrary bytes, arbitrary JSON,
and the request's own fields holding arbitrary JSON values, to every RPC. Every reply is 200 or a
documented Connect error with its ErrorInfo (never unknown or internal), the server stays up, and
data it did not accept to change stays as it was."""

from __future__ import annotations

import http.client
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsvc_client.v1 import error_memory_pb2, fit_pb2, memory_pb2
from tests.support import ServerProcess

CANARY = "canary"
DOCUMENTED = {400: {"invalid_argument", "failed_precondition"}, 404: {"not_found"}, 429: {"resource_exhausted"}}
METHODS = {f"/{service.full_name}/{method.name}": method for module in (memory_pb2, error_memory_pb2, fit_pb2)
           for service in module.DESCRIPTOR.services_by_name.values() for method in service.methods}
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False), st.text(max_size=60).filter(lambda text: text != CANARY),
                    st.sampled_from(["", "..", "../x", "ROLE_USER", "MATCH_HYBRID", "RESET_MODE_ALL", "1d", "x" * 300]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)


def fields_of(path: str) -> st.SearchStrategy[dict]:
    """Objects with the request type's own field names (as written in the .proto or in JSON) set to any value."""
    names = [name for field in METHODS[path].input_type.fields for name in (field.name, field.json_name)]
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


bodies = st.sampled_from(sorted(METHODS)).flatmap(lambda path: st.tuples(st.just(path), st.one_of(
    fields_of(path).map(lambda body: json.dumps(body).encode()),
    values.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=200),
)))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("http-properties") / "data", "--http-listen", "127.0.0.1:0",
                           "--max-request-bytes", "100000").start()
    with server.client() as client:
        client.append(CANARY, [("user", "keep me")])
    canary = (server.data_dir / "sessions" / CANARY / "history.json").read_bytes()
    host, port = server.http.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    yield connection
    connection.close()
    assert (server.data_dir / "sessions" / CANARY / "history.json").read_bytes() == canary
    with server.client() as client:
        assert [m.content for m in client.get_context(CANARY).window] == ["keep me"]
    server.kill()


@EXAMPLES
@given(call=bodies)
def test_any_body_to_any_rpc_gets_a_documented_answer(live, call):
    path, body = call
    live.request("POST", path, body, {"content-type": "application/json"})
    reply = live.getresponse()
    answer = json.loads(reply.read())
    if reply.status == 200:
        return
    assert answer["code"] in DOCUMENTED.get(reply.status, set()), (reply.status, answer)
    assert answer["message"]
    assert answer["details"][0]["type"] == "google.rpc.ErrorInfo" and answer["details"][0]["debug"]["reason"]
