"""Every thin client names the session of a per-session RPC in the request metadata
`memsvc-session`, so a proxy in front of several servers can route by it (issue 16). Checked on
the wire: each client talks to a real server through a real gRPC proxy that records what
arrives, and each recorded request is decoded to compare its session_id with the header.
"""

from __future__ import annotations

import pytest

from memsvc_client import SESSION_METADATA, Client, MemsvcError
from memsvc_client.rpcs import RPCS, session_header
from tests.support.grpc_proxy import RecordingProxy, Seen
from tests.support.runners import scenario_runner

pytestmark = pytest.mark.in_process

PER_SESSION = {name for name, rpc in RPCS.items() if rpc.per_session}
OPERATOR = {"ExportSession", "ImportSession", "HoldSession", "ReleaseSession"}
"""Backups and moves: `memsvc export`, `import-session` and `reshard` (Python) run them; the Node and Go
clients expose the generated stubs, with the header on the unary ones, but no wrapper and no scenario step."""
STREAMING = {rpc.path: "unary_stream" if rpc.response_streaming else "stream_unary"
             for rpc in RPCS.values() if rpc.request_streaming or rpc.response_streaming}


def session_of(call: Seen) -> str:
    rpc = RPCS[call.method.rpartition("/")[2]]
    return rpc.session_of(rpc.request.FromString(call.request))


def check(calls: list[Seen]) -> set[str]:
    """Assert the header on every call; return the RPCs seen."""
    for call in calls:
        name = call.method.rpartition("/")[2]
        if name in PER_SESSION and session_of(call):
            assert call.metadata.get(SESSION_METADATA) == session_header(session_of(call)), call
        else:
            assert SESSION_METADATA not in call.metadata, call
    return {call.method.rpartition("/")[2] for call in calls}


def test_the_per_session_rpcs_are_those_naming_a_session_but_error_memorys():
    assert PER_SESSION == {"Append", "GetContext", "Search", "Compact", "Summarize", "GetSummary", "Reset",
                           "RemoveSession", "ListMessages", "DeleteMessages", "ReplaceMessages", "FitContext",
                           "GetServerInfo",
                           "ExportSession", "ImportSession", "HoldSession", "ReleaseSession"}
    assert RPCS["ImportSession"].session_path == ("head", "session_id"), "a stream is routed by its head"


def test_python_sends_the_session_on_every_per_session_rpc(server):
    calls = [
        lambda m: m.append("py-1", [("user", "hello"), ("assistant", "hi")]),
        lambda m: m.get_context("py-1"),
        lambda m: m.list_messages("py-1"),
        lambda m: m.delete_messages("py-1", last=1),
        lambda m: m.replace_messages("py-1", [("user", "hello again")]),
        lambda m: m.search("py-1", "hello", match="keyword"),
        lambda m: m.compact("py-1"),
        lambda m: m.summarize("py-1"),
        lambda m: m.get_summary("py-1"),
        lambda m: m.reset("py-1"),
        lambda m: m.get_server_info("py-1"),
        lambda m: m.import_session(list(m.export_session("py-1"))),  # ALREADY_EXISTS: it is still here
        lambda m: m.hold_session("py-1"),
        lambda m: m.release_session("py-1"),
        lambda m: m.remove_session("py-1"),
        lambda m: m.fit_context("py-1", "openai", "gpt-4o", [{"role": "user", "content": "hello"}]),
        lambda m: m.get_server_info(),
        lambda m: m.list_held_sessions(),
        lambda m: m.list_sessions(),
        lambda m: m.record_error("t", "boom", "fix", session_id="py-1"),
        lambda m: m.lookup_errors("t", "boom"),
        lambda m: m.search_errors("boom"),
        lambda m: m.list_errors(),
    ]
    with RecordingProxy(server.tcp, STREAMING) as proxy, Client(proxy.target) as memory:
        for call in calls:
            try:
                call(memory)
            except MemsvcError:
                pass  # Summarize without a model, GetSummary without a summary: still on the wire
        seen = check(proxy.calls)
    assert PER_SESSION <= seen and {"ListSessions", "RecordError", "LookupErrors", "ListHeldSessions"} <= seen


@pytest.mark.parametrize("language", ["node", "go"])
def test_node_and_go_send_the_session_on_every_per_session_rpc(server, language):
    run = scenario_runner(language)
    with RecordingProxy(server.tcp) as proxy:
        results = run(proxy.target, f"meta-{language}")
        seen = check(proxy.calls)
    assert len(proxy.calls) == len(results)
    wrapped = PER_SESSION - OPERATOR
    assert wrapped <= seen, f"the scenario reaches every per-session RPC, missing {wrapped - seen}"
