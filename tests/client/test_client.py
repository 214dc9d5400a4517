"""memsvc_client.Client against a real server: plain arguments, typed results, one error class
per status code, retries where the contract allows them, and deadlines."""

from __future__ import annotations

import json
import signal
import time

import grpc
import pytest

from memsvc_client import (
    DEFAULT_TIMEOUT,
    FIT_TIMEOUT,
    SESSION_METADATA,
    Client,
    DeadlineExceededError,
    FailedPreconditionError,
    FitContextResponse,
    InvalidArgumentError,
    MemsvcError,
    Message,
    NotFoundError,
    ResourceExhaustedError,
    RetryPolicy,
    UnauthenticatedError,
    UnavailableError,
)
from memsvc_client.errors import ERRORS
from memsvc_client.v1 import memory_pb2 as pb

pytestmark = pytest.mark.in_process

QUICK = RetryPolicy(attempts=4, initial_backoff=0.01, max_backoff=0.05)
RUN = [{"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": "What is in a.txt?"},
       {"role": "assistant", "content": None, "tool_calls": [
           {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]},
       {"role": "tool", "tool_call_id": "c1", "content": "hello"}]
"A small agent run in the chat-completions shape."


def test_plain_arguments_in_typed_results_out(client):
    appended = client.append("s1", [("user", "We deploy on Fridays?"),
                                    {"role": "assistant", "content": "No: never on Fridays.", "sender": "planner"}])
    first, second = appended.messages  # the reply's ids and times: issue 12 may drop the rest of the echo
    assert first.id < second.id and first.send_at_unix_nano > 0 and appended.replayed is False
    window = client.get_context("s1").window
    assert [(m.role, m.content, m.sender) for m in window] == [
        ("user", "We deploy on Fridays?", ""), ("assistant", "No: never on Fridays.", "planner")]
    assert isinstance(window[0], Message) and window[0].id == first.id
    client.append("s1", [window[1]])  # a message read back is valid input
    hits = client.search("s1", "Fridays", match="keyword", time_range="week", limit=5).hits
    assert {hit.message.content for hit in hits} >= {"We deploy on Fridays?", "No: never on Fridays."}
    assert all(hit.source == "recent" and hit.score > 0 and not hit.is_context for hit in hits)
    deleted = client.reset("s1", "all").deleted
    assert deleted is not None and deleted.history_messages == 3
    assert client.get_context("s1").window == []


def test_the_readme_failure_of_a_new_user_now_works(client):
    """issue 18: `memory.search("s1", "Fridays", match="keyword")` raised ValueError."""
    client.append("s1", [("user", "Fridays are for docs")])
    assert [hit.message.content for hit in client.search("s1", "Fridays", match="keyword").hits] == [
        "Fridays are for docs"]


def test_search_passes_the_keyword_options(client):
    client.append("s1", [("user", "a blue car passed a grey heron"), ("assistant", "blue skies today"),
                         ("user", "lunch was pasta")])
    assert len(client.search("s1", "heron blue", match="keyword").hits) == 2
    strict = client.search("s1", "heron blue", match="keyword", require_all_words=True).hits
    assert [hit.message.content for hit in strict] == ["a blue car passed a grey heron"]
    around = client.search("s1", "pasta", match="keyword", with_context=True).hits
    assert [(hit.is_context, hit.run) for hit in around] == [(True, 1), (True, 1), (False, 1)]


def test_search_passes_any_request_field_through_by_name(client):
    client.append("s1", [("user", "old sandbox", ), ("assistant", "noted")])
    later = time.time_ns()
    client.append("s1", [("user", "new sandbox")])
    hits = client.search("s1", "sandbox", match="keyword", since_unix_nano=later).hits
    assert [hit.message.content for hit in hits] == ["new sandbox"]
    with pytest.raises(TypeError, match="no field 'sinse_unix_nano'"):
        client.search("s1", "sandbox", sinse_unix_nano=later)


def test_error_memory_takes_outcomes_as_names(client):
    stored = client.record_error("web_fetch", "HTTP 403 from cloudflare", "send a browser User-Agent",
                                 cause="bot protection", keywords=["cloudflare"], session_id="s1")
    assert stored.stored and stored.record is not None and stored.record.outcome == "resolved"
    discarded = client.record_error("web_fetch", "HTTP 500", "retry", outcome="failed")
    assert not discarded.stored and discarded.record is None and discarded.detail
    found = client.lookup_errors("web_fetch", "403 Forbidden from cloudflare")
    assert [record.id for record in found.records] == [stored.record.id]
    assert "send a browser User-Agent" in found.related_errors
    assert client.update_error_action(stored.record.id, "use the API").record.action == "use the API"
    assert client.delete_error(stored.record.id).record.id == stored.record.id


def test_fit_context_takes_chat_dicts_or_their_json_and_gives_typed_results(client):
    sent = [*RUN[:2], json.dumps(RUN[2], separators=(",", ":")), RUN[3]]
    fitted = client.fit_context("s1", "openai", "gpt-4o", sent)
    assert isinstance(fitted, FitContextResponse) and [json.loads(m) for m in fitted.messages] == RUN
    assert fitted.messages[2] == sent[2], "a message given as JSON comes back byte for byte"
    assert (fitted.context_window, fitted.window_source, fitted.window_entry) == (128000, "shipped", "openai/gpt-4o")
    assert (fitted.counting, fitted.tokenizer, fitted.fits, fitted.changed) == ("exact", "o200k_base", True, False)
    assert [(s.stage, s.outcome) for s in fitted.stages] == [("check_threshold", "unchanged")]
    switched = client.fit_context("s1", "openai", "gpt-4o", RUN, previous_model="claude-3-5-sonnet")
    assert [(s.stage, s.outcome) for s in switched.stages][1:] == [("raw_tool_fallback", "compacted")]
    assert json.loads(switched.messages[3]) == {"role": "user", "content": "[tool result read_file id=c1]\nhello"}
    with pytest.raises(FailedPreconditionError) as raised:
        client.fit_context("s1", "openai", "gpt-4o", RUN, context_window=20)
    assert raised.value.reason == "CONTEXT_TOO_LARGE" and "budget of 16" in raised.value.message
    with pytest.raises(TypeError, match="wrap a single message in a list"):
        client.fit_context("s1", "openai", "gpt-4o", RUN[0])


def test_fit_context_is_retried_names_its_session_and_waits_long_by_default(server, proxy):
    with Client(proxy.target, retry=QUICK) as memory:
        proxy.fail_next("FitContext", grpc.StatusCode.UNAVAILABLE, times=2)
        assert memory.fit_context("s1", "openai", "gpt-4o", RUN).fits
        memory.get_context("s1", timeout=None)
        memory.fit_context("s1", "openai", "gpt-4o", RUN, timeout=3)
        proxy.fail_next("FitContext", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(UnavailableError):
            memory.fit_context("s1", "openai", "gpt-4o", RUN, retry=False)
    with Client(proxy.target, timeout=900) as patient:
        patient.fit_context("s1", "openai", "gpt-4o", RUN)
    calls = proxy.seen("FitContext")
    assert len(calls) == 6 and all(call.metadata[SESSION_METADATA] == "s1" for call in calls)
    # grpc-timeout travels rounded up, in its own units: a second's slack.
    assert all(FIT_TIMEOUT - 60 < call.deadline_seconds < FIT_TIMEOUT + 1 for call in calls[:3])
    assert proxy.seen("GetContext")[0].deadline_seconds < DEFAULT_TIMEOUT + 1 < FIT_TIMEOUT
    assert calls[3].deadline_seconds < 4 and calls[5].deadline_seconds > FIT_TIMEOUT + 1


@pytest.mark.parametrize(("call", "error_class", "reason"), [
    (lambda c: c.append("bad\x00id", [("user", "x")]), InvalidArgumentError, "INVALID_SESSION_ID"),
    (lambda c: c.get_summary("never"), NotFoundError, "SESSION_NOT_FOUND"),
    (lambda c: c.append("s1", [("user", "x")]) and c.summarize("s1"), FailedPreconditionError,
     "SUMMARY_MODEL_NOT_CONFIGURED"),
    (lambda c: c.delete_error("nope"), NotFoundError, "ERROR_RECORD_NOT_FOUND"),
])
def test_each_status_code_has_its_error_class_with_the_stable_reason(client, call, error_class, reason):
    with pytest.raises(error_class) as raised:
        call(client)
    assert isinstance(raised.value, MemsvcError) and ERRORS[raised.value.code] is error_class
    assert raised.value.reason == reason and raised.value.message
    assert str(raised.value).startswith(f"{raised.value.code.name} {reason}: ")


def test_a_missing_token_is_unauthenticated(make_server, tmp_path):
    token = tmp_path / "token"
    token.write_text("secret\n")
    server = make_server("--token-file", str(token))
    with server.client() as anonymous, pytest.raises(UnauthenticatedError) as raised:
        anonymous.list_sessions()
    assert raised.value.reason == "MISSING_TOKEN"
    with server.client(token="secret") as memory:
        assert memory.list_sessions().sessions == []


@pytest.mark.as_process
def test_a_server_that_is_down_is_unavailable_after_the_retries(server):
    target = server.tcp
    server.kill()
    with Client(target, retry=QUICK) as memory, pytest.raises(UnavailableError) as raised:
        memory.get_context("s1")
    assert raised.value.reason == ""


def test_safe_rpcs_are_retried_after_unavailable(server, proxy):
    with Client(proxy.target, retry=QUICK) as memory:
        memory.append("s1", [("user", "hello")])
        proxy.fail_next("GetContext", grpc.StatusCode.UNAVAILABLE, times=2)
        assert [m.content for m in memory.get_context("s1").window] == ["hello"]
        assert len(proxy.seen("GetContext")) == 3
        proxy.fail_next("Reset", grpc.StatusCode.UNAVAILABLE)
        assert memory.reset("s1").deleted.history_messages == 1
        assert len(proxy.seen("Reset")) == 2


def test_retries_stop_at_the_policy_and_never_on_other_codes(server, proxy):
    with Client(proxy.target, retry=QUICK) as memory:
        proxy.fail_next("ListSessions", grpc.StatusCode.UNAVAILABLE, times=4)
        with pytest.raises(UnavailableError):
            memory.list_sessions()
        assert len(proxy.seen("ListSessions")) == 4
        proxy.fail_next("SearchErrors", grpc.StatusCode.INTERNAL)
        with pytest.raises(MemsvcError) as raised:
            memory.search_errors("x")
        assert raised.value.code == grpc.StatusCode.INTERNAL and len(proxy.seen("SearchErrors")) == 1


def test_append_is_retried_only_with_an_idempotency_key(server, proxy):
    with Client(proxy.target, retry=QUICK) as memory:
        proxy.fail_next("Append", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(UnavailableError):
            memory.append("s1", [("user", "no key")])
        assert len(proxy.seen("Append")) == 1
        proxy.fail_next("Append", grpc.StatusCode.UNAVAILABLE)
        assert not memory.append("s1", [("user", "with a key")], idempotency_key="k1").replayed
        assert len(proxy.seen("Append")) == 3
        assert [m.content for m in memory.get_context("s1").window] == ["with a key"]


def test_summarize_is_not_retried_unless_asked(server, proxy):
    with Client(proxy.target, retry=QUICK) as memory:
        memory.append("s1", [("user", "x")])
        proxy.fail_next("Summarize", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(UnavailableError):
            memory.summarize("s1")
        proxy.fail_next("Summarize", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(FailedPreconditionError):  # retried, then the server's own answer
            memory.summarize("s1", retry=True)
        assert len(proxy.seen("Summarize")) == 3


def test_retries_can_be_turned_off(server, proxy):
    with Client(proxy.target, retry=None) as memory:
        proxy.fail_next("GetContext", grpc.StatusCode.UNAVAILABLE)
        with pytest.raises(UnavailableError):
            memory.get_context("s1")
        assert len(proxy.seen("GetContext")) == 1


@pytest.mark.as_process
def test_the_deadline_covers_every_attempt(server):
    """A stopped server (SIGSTOP) accepts the connection but never answers."""
    with server.client(timeout=0.5) as memory:
        memory.append("s1", [("user", "x")])
        server.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(DeadlineExceededError):
                memory.get_context("s1")
            with pytest.raises(DeadlineExceededError):
                memory.get_context("s1", timeout=0.2)
            elapsed = time.monotonic() - started
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert elapsed < 5, "a deadline exceeded is not retried"
        assert [m.content for m in memory.get_context("s1").window] == ["x"]


def test_bad_arguments_fail_before_the_wire(client):
    with pytest.raises(ValueError, match="role must be one of user, assistant"):
        client.append("s1", [("robot", "x")])
    with pytest.raises(TypeError, match="wrap a single pair in a list"):
        client.append("s1", ("user", "x"))
    with pytest.raises(ValueError, match="unix sockets in plaintext"):
        Client("unix:///tmp/x.sock", tls=True)
    assert client.list_sessions().sessions == []


def test_raw_protobuf_messages_are_accepted_too(client):
    client.append("s1", [pb.Message(role=pb.ROLE_USER, content="from the stubs", sender="legacy")])
    assert client.get_context("s1").window[0].sender == "legacy"


def test_requests_past_the_servers_limit_are_refused_before_sending_and_large_replies_arrive(server, proxy):
    big = [{"role": "user", "content": f"{n}" + "z" * 900_000} for n in range(5)]
    with Client(server.tcp, timeout=60) as memory:
        memory.append("large", big)
        context = memory.get_context("large")  # 4.5 MB: past a default client's 4 MiB, so the newest that fit
        assert [m.content for m in context.window] == [m["content"] for m in big][1:]
        assert context.omitted_messages == 1
        assert [m.content for m in memory.list_messages("large", newest_first=True,
                                                        page_token=context.older_page_token).messages] == [
            big[0]["content"]]
    with Client(proxy.target, timeout=60) as memory:
        with pytest.raises(ResourceExhaustedError) as refused:
            memory.append("large", big * 2)
        assert refused.value.reason == "REQUEST_TOO_LARGE" and refused.value.metadata == {"limit": str(8 << 20)}
        assert proxy.seen("Append") == [], "the refused request never left the client"
    with Client(server.tcp, timeout=60, max_request_bytes=16 << 20) as memory:  # a client told of a bigger limit
        with pytest.raises(ResourceExhaustedError) as refused_by_server:
            memory.append("large", big * 2)
        assert refused_by_server.value.reason == "", "grpcio's own refusal, past the server's 8 MiB, has none"
        assert memory.list_sessions().sessions[0].message_count == 5, "nothing of it was stored"
