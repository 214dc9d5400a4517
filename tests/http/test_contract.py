"""Every RPC of every service over HTTP/JSON with the real curl, against a real server on loopback:
replies equal to gRPC's, Connect error codes with their HTTP statuses and ErrorInfo reasons, the
token, the limits, TLS and a graceful stop."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID
from google.protobuf import json_format

from memsvc_client import MemsvcError
from memsvc_client.v1 import (
    error_memory_pb2,
    error_memory_pb2_grpc,
    fit_pb2,
    fit_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
)
from tests.support import curl
from tests.support.certificates import tls_flags
from tests.support.llm_server import Reply, summary_reply

pytestmark = pytest.mark.in_process

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-0123456789abcdef"
EVERY_RPC = {f"{service.name}/{method.name}" for module in (memory_pb2, error_memory_pb2, fit_pb2)
             for service in module.DESCRIPTOR.services_by_name.values() for method in service.methods}
RUN = [json.dumps({"role": "system", "content": "You are a careful agent."}),
       json.dumps({"role": "user", "content": "What is in a.txt?"}),
       json.dumps({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
           "name": "read_file", "arguments": json.dumps({"path": "a.txt"})}}]}),
       json.dumps({"role": "tool", "tool_call_id": "c1", "content": "hello"})]
"A small agent run in the chat-completions shape, as FitContext takes it."
CONVERSATION = [{"role": "ROLE_USER", "content": "We deploy on Fridays?"},
                {"role": "ROLE_ASSISTANT", "content": "No: never on Fridays."},
                {"role": "ROLE_USER", "content": "And the sandbox?"},
                {"role": "ROLE_ASSISTANT", "content": "The sandbox deploys any day."}]


def http(*flags: str) -> tuple[str, ...]:
    return ("--http-listen", "127.0.0.1:0", *flags)


def as_json(message) -> dict:
    """A gRPC reply as the Connect protocol writes it: proto3 JSON, zero fields left out."""
    return json_format.MessageToDict(message)


def test_every_rpc_answers_json_over_curl_as_grpc_does(make_server, llm_server):
    server = make_server(*http("--max-history-messages", "2", "--llm-base-url", llm_server.base_url,
                               "--summary-model", "sum", "--llm-max-retries", "0"))
    base, called = f"http://{server.http}", []

    def call(rpc: str, body: dict) -> dict:
        reply = curl.post(base, rpc, body)
        assert reply.status == 200, reply.body
        called.append(rpc)
        return reply.body

    appended = call("MemoryService/Append", {"session_id": "ops", "messages": CONVERSATION})
    assert [m["id"] for m in appended["messages"]] == ["1", "2", "3", "4"]  # uint64 is a JSON string
    channel = grpc.insecure_channel(server.tcp)
    memory, errors = memory_pb2_grpc.MemoryServiceStub(channel), error_memory_pb2_grpc.ErrorMemoryServiceStub(channel)
    fit = fit_pb2_grpc.FitServiceStub(channel)
    with server.client() as grpc_client, channel:
        context = call("MemoryService/GetContext", {"session_id": "ops"})
        assert context == as_json(memory.GetContext(memory_pb2.GetContextRequest(session_id="ops")))
        assert [m["content"] for m in context["window"]] == ["And the sandbox?", "The sandbox deploys any day."]
        found = call("MemoryService/Search", {"sessionId": "ops", "query": "fridays", "match": "MATCH_KEYWORD"})
        assert found == as_json(memory.Search(memory_pb2.SearchRequest(session_id="ops", query="fridays",
                                                                        match=memory_pb2.MATCH_KEYWORD)))
        assert {hit["message"]["content"] for hit in found["hits"]} >= {"No: never on Fridays."}
        llm_server.script("sum", summary_reply(["Don't: deploy on Fridays"], topic="deploys"))
        summarized = call("MemoryService/Summarize", {"session_id": "ops"})
        assert summarized["count"] == 4 and summarized["summary"]["keyDecisions"] == ["Don't: deploy on Fridays"]
        summary = call("MemoryService/GetSummary", {"session_id": "ops"})
        assert summary == as_json(memory.GetSummary(memory_pb2.GetSummaryRequest(session_id="ops")))
        assert int(summary["cursorUnixNano"]) > 0
        last_run = summary["lastRun"]
        assert (last_run["trigger"], last_run["outcome"], last_run["messages"]) == (
            "SUMMARY_TRIGGER_SUMMARIZE", "SUMMARY_OUTCOME_SUMMARIZED", 4)
        assert int(last_run["startedAtUnixNano"]) <= int(last_run["finishedAtUnixNano"])
        listed = call("MemoryService/ListSessions", {"session_id_contains": "OP"})
        assert [s["sessionId"] for s in listed["sessions"]] == ["ops"] and listed["sessions"][0]["hasSummary"]
        listed = call("MemoryService/ListMessages", {"session_id": "ops", "page_size": 3, "newest_first": True})
        assert listed == as_json(memory.ListMessages(memory_pb2.ListMessagesRequest(
            session_id="ops", page_size=3, newest_first=True)))
        assert [m["id"] for m in listed["messages"]] == ["2", "3", "4"] and listed["nextPageToken"] == "2"
        call("MemoryService/Append", {"session_id": "ops", "messages": [
            {"role": "ROLE_TOOL", "content": "a tool's answer", "payload_json": '{"tool_call_id": "c1"}'}]})
        popped = call("MemoryService/DeleteMessages", {"session_id": "ops", "last": 1})
        assert [(m["role"], m["payloadJson"]) for m in popped["messages"]] == [("ROLE_TOOL", '{"tool_call_id": "c1"}')]
        assert popped["deleted"]["historyMessages"] == 1
        assert call("MemoryService/Compact", {"session_id": "ops"})["removed"] == 2
        assert [m.content for m in grpc_client.get_context("ops").window] == [m["content"] for m in CONVERSATION[2:]]
        reset = call("MemoryService/Reset", {"session_id": "ops", "mode": "RESET_MODE_SUMMARY"})
        assert reset["deleted"]["historyMessages"] == 2 and "summary" not in reset["deleted"]
        assert grpc_client.get_summary("ops").summary.key_decisions == ["Don't: deploy on Fridays"]
        call("MemoryService/Append", {"session_id": "ops", "messages": CONVERSATION[:1]})
        removed = call("MemoryService/RemoveSession", {"session_id": "ops"})
        assert removed["deleted"]["historyMessages"] == 1 and removed["deleted"]["summary"] is True
        assert not grpc_client.list_sessions().sessions
        replaced = call("MemoryService/ReplaceMessages", {"session_id": "ops-replaced", "messages": CONVERSATION[:2],
                                                          "expected_last_id": "0"})
        assert [m["id"] for m in replaced["messages"]] == ["1", "2"]
        assert [m.content for m in grpc_client.list_messages("ops-replaced").messages] == \
            [m["content"] for m in CONVERSATION[:2]]

        recorded = call("ErrorMemoryService/RecordError", {
            "tool_name": "web_fetch", "symptom": "HTTP 403 Forbidden from cloudflare",
            "action": "send a browser User-Agent", "outcome": "OUTCOME_RESOLVED", "keywords": ["cloudflare"]})
        lesson = recorded["record"]
        assert recorded["stored"] and lesson["toolName"] == "web_fetch"
        looked_up = call("ErrorMemoryService/LookupErrors", {"tool_name": "web_fetch",
                                                             "error_text": "403 Forbidden (cloudflare)"})
        assert [r["id"] for r in looked_up["records"]] == [lesson["id"]]
        assert "send a browser User-Agent" in looked_up["relatedErrors"]
        searched = call("ErrorMemoryService/SearchErrors", {"query": "CLOUDFLARE"})
        assert [r["id"] for r in searched["records"]] == [lesson["id"]]
        listed = call("ErrorMemoryService/ListErrors", {})
        assert listed == as_json(errors.ListErrors(error_memory_pb2.ListErrorsRequest()))
        expiry = listed["records"][0]["expiresAtUnixNano"]
        updated = call("ErrorMemoryService/UpdateErrorAction", {"id": lesson["id"], "action": "rotate the User-Agent"})
        assert updated["record"]["action"] == "rotate the User-Agent"
        assert updated["record"]["expiresAtUnixNano"] == expiry
        assert grpc_client.list_errors().records[0].action == "rotate the User-Agent"
        deleted = call("ErrorMemoryService/DeleteError", {"id": lesson["id"]})
        assert deleted["record"]["id"] == lesson["id"] and not grpc_client.list_errors().records

        fitted = call("FitService/FitContext", {"session_id": "ops", "vendor": "openai", "model": "gpt-4o",
                                                "messages": RUN})
        assert fitted == as_json(fit.FitContext(fit_pb2.FitContextRequest(session_id="ops", vendor="openai",
                                                                           model="gpt-4o", messages=RUN)))
        assert fitted["messages"] == RUN and fitted["windowSource"] == "WINDOW_SOURCE_SHIPPED"
        assert [(s["stage"], s["outcome"]) for s in fitted["stages"]] == [("FIT_STAGE_CHECK_THRESHOLD",
                                                                           "FIT_OUTCOME_UNCHANGED")]
        assert fitted["fits"] and "changed" not in fitted  # proto3 JSON leaves false out
        switched = call("FitService/FitContext", {"sessionId": "ops", "model": "gpt-4o", "messages": RUN,
                                                  "previousModel": "claude-3-5-sonnet"})
        assert [stage["stage"] for stage in switched["stages"]] == ["FIT_STAGE_CHECK_THRESHOLD",
                                                                    "FIT_STAGE_RAW_TOOL_FALLBACK"]
        assert json.loads(switched["messages"][3]) == {"role": "user",
                                                       "content": "[tool result read_file id=c1]\nhello"}
        assert len(llm_server.calls()) == 1  # Summarize's: neither run needed the model
    # A new RPC in the contract is served over HTTP by itself; this test wants one call of it too.
    assert set(called) == EVERY_RPC


@pytest.fixture
def plain(make_server):
    server = make_server(*http("--max-message-bytes", "1000", "--max-request-bytes", "20000"))
    with server.client() as client:
        client.append("kept", [("user", "stored before the bad calls")])
    return server


@pytest.mark.parametrize(("rpc", "body", "status", "code", "reason"), [
    ("MemoryService/Append", {"session_id": "bad\u202eid", "messages": CONVERSATION}, 400, "invalid_argument",
     "INVALID_SESSION_ID"),
    ("MemoryService/Append", {"session_id": "kept", "messages": [{"role": "ROLE_USER", "content": "x" * 1001}]},
     400, "invalid_argument", "MESSAGE_TOO_LARGE"),
    ("MemoryService/Append", {"session_id": "kept", "messages": [{"role": 7, "content": "x"}]}, 400,
     "invalid_argument", "INVALID_ROLE"),
    ("MemoryService/Append", {"session_id": "kept", "mesages": []}, 400, "invalid_argument", "MALFORMED_REQUEST"),
    ("MemoryService/Append", '{"session_id": "kept", ', 400, "invalid_argument", "MALFORMED_REQUEST"),
    ("MemoryService/Append", '[{"session_id": "kept"}]', 400, "invalid_argument", "MALFORMED_REQUEST"),
    ("MemoryService/Append", {"session_id": 12}, 400, "invalid_argument", "MALFORMED_REQUEST"),
    ("MemoryService/Reset", {"session_id": "kept", "mode": "RESET_MODE_EVERYTHING"}, 400, "invalid_argument",
     "MALFORMED_REQUEST"),
    ("MemoryService/Reset", {"session_id": "kept", "mode": 9}, 400, "invalid_argument", "INVALID_ENUM"),
    ("MemoryService/GetSummary", {"session_id": "nobody"}, 404, "not_found", "SESSION_NOT_FOUND"),
    ("MemoryService/Summarize", {"session_id": "kept"}, 400, "failed_precondition", "SUMMARY_MODEL_NOT_CONFIGURED"),
    ("MemoryService/Search", {"session_id": "kept", "query": ""}, 400, "invalid_argument", "EMPTY_QUERY"),
    ("MemoryService/Append", {"session_id": "kept", "messages": [{"content": "y" * 900}] * 30}, 429,
     "resource_exhausted", "REQUEST_TOO_LARGE"),
    ("ErrorMemoryService/RecordError", {"symptom": "s", "action": "a", "outcome": "OUTCOME_RESOLVED"}, 400,
     "invalid_argument", "TOOL_NAME_REQUIRED"),
    ("ErrorMemoryService/UpdateErrorAction", {"id": "404", "action": "a"}, 404, "not_found", "ERROR_RECORD_NOT_FOUND"),
    ("ErrorMemoryService/ListErrors", {"page_token": "not-a-token"}, 400, "invalid_argument", "INVALID_PAGE_TOKEN"),
    ("FitService/FitContext", {"session_id": "kept", "model": "gpt-4o", "messages": ["{not json"]}, 400,
     "invalid_argument", "INVALID_CHAT_MESSAGE"),
    ("FitService/FitContext", {"session_id": "kept", "messages": RUN}, 400, "invalid_argument", "MODEL_REQUIRED"),
    ("FitService/FitContext", {"session_id": "kept", "model": "gpt-4o", "messages": RUN, "context_window": 20}, 400,
     "failed_precondition", "CONTEXT_TOO_LARGE"),
])
def test_bad_input_gets_the_code_http_status_and_reason_grpc_gives_and_stores_nothing(plain, rpc, body, status,
                                                                                       code, reason):
    history = plain.data_dir / "sessions/kept/history.json"
    before = history.read_bytes()
    reply = curl.post(f"http://{plain.http}", rpc, body)
    assert (reply.status, reply.code, reply.reason) == (status, code, reason), reply.body
    assert reply.body["message"]
    assert history.read_bytes() == before
    assert sorted(path.name for path in (plain.data_dir / "sessions").iterdir()) == ["kept"]


def test_a_request_that_is_not_utf8_is_malformed(plain):
    done = subprocess.run(["curl", "-sS", "-H", "content-type: application/json", "--data-binary", "@-",
                           f"http://{plain.http}/memsvc.v1.MemoryService/GetContext"],
                          input=b'{"session_id": "\xff\xfe"}', capture_output=True, timeout=60, check=True)
    body = json.loads(done.stdout)
    assert body["code"] == "invalid_argument" and body["details"][0]["debug"]["reason"] == "MALFORMED_REQUEST"


def test_what_is_not_an_rpc_call_gets_the_status_http_gives_it(plain):
    def status(*args: str) -> str:
        return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *args], capture_output=True,
                              text=True, timeout=60, check=True).stdout

    rpc = f"http://{plain.http}/memsvc.v1.MemoryService/GetContext"
    assert status("-H", "content-type: application/json", "-d", "{}", f"http://{plain.http}/memsvc.v1.MemoryService/"
                  "NoSuchCall") == "404"  # the protocol's UNIMPLEMENTED
    assert status(rpc) == "405"  # RPCs are POSTed
    assert status("-H", "content-type: text/plain", "-d", "{}", rpc) == "415"  # a browser form cannot call
    assert status("-H", "content-type: application/json", "-H", "content-encoding: gzip", "-d", "{}", rpc) == "501"
    assert status(f"http://{plain.http}/") == "200" and status(f"http://{plain.http}/no-such-page") == "404"


def test_the_token_guards_every_rpc_over_http_as_over_grpc(make_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    server = make_server(*http("--token-file", str(token_file)))
    base = f"http://{server.http}"
    append = {"session_id": "s", "messages": CONVERSATION[:1]}
    missing = curl.post(base, "MemoryService/Append", append)
    assert (missing.status, missing.code, missing.reason) == (401, "unauthenticated", "MISSING_TOKEN")
    for wrong in ("wrong", TOKEN + "x", TOKEN.upper()):
        refused = curl.post(base, "ErrorMemoryService/ListErrors", {}, token=wrong)
        assert (refused.status, refused.code, refused.reason) == (401, "unauthenticated", "INVALID_TOKEN")
    assert not (server.data_dir / "sessions").exists() or not any((server.data_dir / "sessions").iterdir())
    assert curl.post(base, "MemoryService/Append", append, token=TOKEN).status == 200
    with server.client(token=TOKEN) as member:
        assert [m.content for m in member.get_context("s").window] == ["We deploy on Fridays?"]
    page = subprocess.run(["curl", "-sS", "-w", "%{http_code}", "-o", "/dev/null", f"{base}/"], capture_output=True,
                          text=True, timeout=60, check=True)
    assert page.stdout == "200"  # the page itself holds nothing: its login asks for the token


def test_calls_past_max_concurrent_rpcs_are_refused_at_once_and_grpc_keeps_its_own_budget(make_server, llm_server):
    server = make_server(*http("--max-concurrent-rpcs", "1", "--llm-base-url", llm_server.base_url,
                               "--summary-model", "sum", "--llm-max-retries", "0"))
    base = f"http://{server.http}"
    with server.client() as client:
        client.append("slow", [("user", "a question"), ("assistant", "an answer")])
    llm_server.script("sum", Reply(content=summary_reply(["Do: wait"]), delay=3.0))
    results = {}
    busy = threading.Thread(target=lambda: results.update(slow=curl.post(base, "MemoryService/Summarize",
                                                                          {"session_id": "slow"})))
    busy.start()
    deadline = time.monotonic() + 30
    while not llm_server.calls("sum") and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    refused = curl.post(base, "MemoryService/ListSessions", {})
    assert time.monotonic() - started < 2.5  # refused at once, not queued behind the slow call
    assert (refused.status, refused.code, refused.reason) == (429, "resource_exhausted", "CONCURRENT_RPC_LIMIT")
    with server.client() as client:
        assert [s.session_id for s in client.list_sessions().sessions] == ["slow"]
    busy.join()
    assert results["slow"].status == 200 and results["slow"].body["count"] == 2
    assert curl.post(base, "MemoryService/ListSessions", {}).status == 200


def test_https_with_the_grpc_listeners_certificate_and_mutual_tls(make_server, server_files, authority, tmp_path):
    server = make_server(*http(*tls_flags(server_files, mutual=True)))
    key, chain = authority.issue("operator", ExtendedKeyUsageOID.CLIENT_AUTH)
    (tmp_path / "client.key").write_bytes(key)
    (tmp_path / "client.crt").write_bytes(chain)
    base = f"https://{server.http}"
    trust = ("--cacert", str(server_files["ca"]))
    with pytest.raises(subprocess.CalledProcessError):  # no client certificate: the handshake fails
        curl.post(base, "MemoryService/ListSessions", {}, options=trust)
    with pytest.raises(subprocess.CalledProcessError):  # plaintext to a TLS port
        curl.post(f"http://{server.http}", "MemoryService/ListSessions", {})
    member = trust + ("--cert", str(tmp_path / "client.crt"), "--key", str(tmp_path / "client.key"))
    assert curl.post(base, "MemoryService/Append", {"session_id": "s", "messages": CONVERSATION[:1]},
                     options=member).status == 200
    with server.client(root_certificates=authority.pem, private_key=key, certificate_chain=chain) as client:
        assert client.get_context("s").window[0].content == "We deploy on Fridays?"


def test_sigterm_lets_an_http_call_in_flight_finish(make_server, llm_server):
    server = make_server(*http("--llm-base-url", llm_server.base_url, "--summary-model", "sum",
                               "--llm-max-retries", "0"))
    with server.client() as client:
        client.append("s", [("user", "q"), ("assistant", "a")])
    llm_server.script("sum", Reply(content=summary_reply(["Do: finish"]), delay=1.5))
    results = {}
    call = threading.Thread(target=lambda: results.update(reply=curl.post(f"http://{server.http}",
                                                                           "MemoryService/Summarize",
                                                                           {"session_id": "s"})))
    call.start()
    while not llm_server.calls("sum"):
        time.sleep(0.02)
    assert server.terminate() == 0
    call.join()
    assert results["reply"].status == 200 and results["reply"].body["count"] == 2


def test_an_http_port_in_use_stops_the_start_with_a_clear_message(server, tmp_path):
    taken = server.tcp  # the gRPC port of a live server
    done = subprocess.run([sys.executable, "-m", "memsvc", "serve", "--data-dir", str(tmp_path / "other"),
                           "--listen", "127.0.0.1:0", "--http-listen", taken], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and f"cannot listen on http_listen {taken}" in done.stderr


def test_grpc_callers_see_no_difference_with_the_http_listener_open(make_server):
    server = make_server(*http())
    with server.client() as client:
        client.append("s", [("user", "x")])
        with pytest.raises(MemsvcError) as caught:
            client.get_context("..")
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.reason == "INVALID_SESSION_ID"


def test_the_documented_one_liners_do_what_they_say(make_server, llm_server):
    page = (ROOT / "docs" / "http.md").read_text()
    block = page[page.index("```sh\n") + 6:page.index("```\n", page.index("```sh\n"))]
    lines = [line for line in block.splitlines() if line.startswith("curl ")]
    assert len(lines) == 7
    server = make_server(*http("--max-history-messages", "2", "--llm-base-url", llm_server.base_url,
                               "--summary-model", "sum", "--llm-max-retries", "0"))
    with server.client() as client:
        client.append("my-session", [(m["role"].removeprefix("ROLE_").lower(), m["content"]) for m in CONVERSATION])
        lesson = client.record_error("web_fetch", "HTTP 403 Forbidden", "retry").record
    llm_server.script("sum", summary_reply(["Do: keep it short"]))
    replies = []
    for line in lines:
        done = subprocess.run(["bash", "-c", line.replace("127.0.0.1:8080", server.http)], capture_output=True,
                              text=True, timeout=60, check=True, env={"ID": lesson.id, "PATH": "/usr/bin:/bin"})
        replies.append(json.loads(done.stdout))
    compact, summarize, keep, wipe, listed, edited, fitted = replies
    assert compact["removed"] == 2 and summarize["count"] == 4  # compacted messages are summarized too
    assert "summary" not in keep["deleted"] and wipe["deleted"] == {"summary": True}  # only the summary was left
    assert [r["id"] for r in listed["records"]] == [lesson.id]
    assert edited["record"]["action"] == "send a browser User-Agent"
    assert edited["record"]["expiresAtUnixNano"] == listed["records"][0]["expiresAtUnixNano"]
    assert [json.loads(m) for m in fitted["messages"]] == [{"role": "system", "content": "Be brief."},
                                                          {"role": "user", "content": "hi"}]
    assert fitted["fits"] and fitted["windowEntry"] == "openai/gpt-4o" and len(fitted["stages"]) == 1
