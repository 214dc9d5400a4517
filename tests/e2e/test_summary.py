"""The rolling summary end to end: a real memsvc server talking to a real
chat-completions server on loopback, driven through gRPC."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import datetime

import grpc
import pytest

from memsvc_client import MemsvcError
from tests.support.llm_server import error, summary_reply

pytestmark = pytest.mark.in_process

SENT_AT = int(datetime(2025, 3, 1, 14, 0).timestamp()) * 1_000_000_000


def llm_flags(base_url: str, *extra: str) -> list[str]:
    return ["--llm-base-url", base_url, "--summary-model", "sum", "--llm-max-retries", "0", *extra]


def conversation(*turns: tuple[str, str], at: int = SENT_AT) -> list[dict]:
    return [dict(role=role, content=text, send_at_unix_nano=at + n * 60 * 1_000_000_000)
            for n, (role, text) in enumerate(turns)]


def status_of(call) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value.code, caught.value.reason, caught.value.message


def test_summarize_without_a_summary_model_says_which_setting_to_set(client):
    client.append("s", [("user", "hi"), ("assistant", "hello")])
    code, reason, message = status_of(lambda: client.summarize("s"))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SUMMARY_MODEL_NOT_CONFIGURED")
    assert "summary_model" in message
    assert status_of(lambda: client.summarize("nobody"))[:2] == (grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND")
    assert status_of(lambda: client.summarize(".."))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert client.get_summary("s").summary is None


def test_summarize_then_read_it_back_in_get_summary_and_the_turn_context(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", summary_reply(["Do: answer in English", "要：寫測試"], topic="deploys", mood="calm"))
    with server.client() as client:
        stored = client.append("s", conversation(("user", "We deploy on Fridays?"), ("assistant", "Never.")))
        reply = client.summarize("s", timeout=30)
        assert reply.count == 2
        assert list(reply.summary.key_decisions) == ["Do: answer in English", "Do: 寫測試"]
        assert reply.summary.current_discussion.topic == "deploys"
        assert json.loads(reply.summary.json)["mood"] == "calm"

        read = client.get_summary("s")
        assert read.summary == reply.summary
        assert read.cursor_unix_nano == stored.messages[-1].send_at_unix_nano

        context = client.get_context("s")
        assert [m.content for m in context.window] == ["We deploy on Fridays?", "Never."]  # nothing leaked in
        assert context.turn_context.role == "user"
        assert context.turn_context.content.startswith("Prior summary:\n```json")
        assert "Do: answer in English" in context.turn_context.content
        assert "We deploy on Fridays?" in llm_server.calls("sum")[0].user

        assert client.summarize("s").count == 0  # nothing new
        assert len(llm_server.calls("sum")) == 1


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_llm_that_is_down_or_refuses_gives_a_clear_status_and_changes_nothing(make_server, llm_server, tmp_path):
    down = make_server(*llm_flags(f"http://127.0.0.1:{closed_port()}/v1"))
    with down.client() as client:
        client.append("s", [("user", "q"), ("assistant", "a")])
        code, reason, _ = status_of(lambda: client.summarize("s"))
        assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "LLM_UNAVAILABLE")
        assert client.get_summary("s").summary is None
    down.terminate()

    refusing = make_server(*llm_flags(llm_server.base_url), directory=tmp_path / "other")
    llm_server.script("sum", error(401, "invalid api key"), "<summary>not json</summary>")
    with refusing.client() as client:
        client.append("s", [("user", "q"), ("assistant", "a")])
        code, reason, message = status_of(lambda: client.summarize("s"))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "LLM_AUTH_FAILED")
        assert "invalid api key" in message
        code, reason, _ = status_of(lambda: client.summarize("s"))
        assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "LLM_REPLY_UNPARSEABLE")
        assert client.get_summary("s").summary is None


RICH_SUMMARY = {
    "key_decisions": ["Do: answer in Traditional Chinese", "Don't: use pandas", "Do: deploy with Helm"],
    "past_discussions": [
        {"topic": "ancient", "description": "before the window", "direction": "", "last_discussed": "2000-01-01 00:00"},
        {"topic": "csv parsing", "description": "chose the csv module", "direction": "done",
         "last_discussed": "2025-03-01 14:00"},
        {"topic": "k8s", "description": "cluster sizing", "direction": "open", "last_discussed": "2025-03-01 14:01"}],
    "current_discussion": {"topic": "release", "description": "v2 notes", "perspectives": "", "direction": "draft"},
}


def test_turn_context_keeps_only_what_the_request_needs(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url, "--decision-model", "judge"))
    llm_server.script("sum", f"<summary>{json.dumps(RICH_SUMMARY)}</summary>")
    llm_server.script("judge", '{"noise": []}')
    with server.client() as client:
        client.append("s", conversation(("user", "parse this csv"), ("assistant", "done with csv")))
        client.summarize("s", timeout=30)

        llm_server.script("judge", '{"key_decisions": [1, 2], "past_discussions": [1], "current_discussion": false}')
        picked = client.get_context("s", request_text="read another CSV file for me")
        judged = llm_server.calls("judge")[-1]
        assert "read another CSV file" in judged.user and "ancient" not in judged.user  # older than the window
        assert "K3. Do: deploy with Helm" in judged.user and "P1. csv parsing" in judged.user
        assert list(picked.summary.key_decisions) == ["Do: answer in Traditional Chinese", "Don't: use pandas"]
        assert [p.topic for p in picked.summary.past_discussions] == ["csv parsing"]
        assert picked.summary.current_discussion is None
        assert "Helm" not in picked.turn_context.content and "csv parsing" in picked.turn_context.content

        llm_server.script("judge", '{"key_decisions": [], "past_discussions": [], "current_discussion": false}')
        nothing = client.get_context("s", request_text="what's 2+2?")
        assert nothing.turn_context is None and nothing.summary is None
        assert len(nothing.window) == 2

        llm_server.script("judge", error(500, "judge is down"))
        failed = client.get_context("s", request_text="anything")
        assert len(failed.summary.key_decisions) == 3 and len(failed.summary.past_discussions) == 3

        calls_before = len(llm_server.calls("judge"))
        whole = client.get_context("s")
        assert len(whole.summary.past_discussions) == 3 and whole.summary.current_discussion is not None
        assert len(llm_server.calls("judge")) == calls_before  # no request text: no judgment


def test_the_job_in_the_server_summarizes_on_its_schedule_skipping_temp_sessions(make_server, llm_server):
    llm_server.script("sum", *[lambda request: summary_reply(topic=first_message(request.user))] * 4)
    server = make_server(*llm_flags(llm_server.base_url, "--summary-schedule", "* * * * * *"))
    with server.client() as client:
        client.append("temp-scratch", [("user", "temporary"), ("assistant", "gone soon")])
        client.append("zz", [("user", "keep me"), ("assistant", "kept")])
        deadline = time.monotonic() + 60
        while client.get_summary("zz").summary is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get_summary("zz").summary.current_discussion.topic == "keep me"
        while client.get_summary("zz").last_run is None and time.monotonic() < deadline:
            time.sleep(0.1)  # recorded just after the summary's save
        run = client.get_summary("zz").last_run
        assert (run.trigger, run.outcome, run.messages) == ("job", "summarized", 2)
        assert client.get_summary("temp-scratch").summary is None  # sessions go in order: it was passed
        assert [first_message(call.user) for call in llm_server.calls("sum")] == ["keep me"]


def first_message(transcript: str) -> str:
    return transcript.split("\n")[0].split(": ", 1)[1]


def test_a_summary_run_waiting_on_the_llm_blocks_no_other_call(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url, "--decision-model", "judge"))
    release = threading.Event()
    llm_server.script("judge", '{"noise": []}')
    llm_server.script("sum", lambda request: (release.wait(30), summary_reply(topic="late"))[1])
    with server.client() as client:
        client.append("s", [("user", "q"), ("assistant", "a")])
        running = threading.Thread(target=lambda: client.summarize("s", timeout=60))
        running.start()
        while not llm_server.calls("sum"):
            time.sleep(0.01)
        # The summary call is in flight on the same session: everything else still answers.
        client.append("s", [("user", "meanwhile")])
        assert [m.content for m in client.get_context("s").window] == ["q", "a", "meanwhile"]
        assert client.get_summary("s").summary is None
        client.append("other", [("user", "x")])
        release.set()
        running.join()
        assert client.get_summary("s").summary.current_discussion.topic == "late"


# -- the last run, as GetSummary reports it ------------------------------------------------------------------


def test_each_run_is_recorded_with_its_outcome_and_times_and_outlives_a_restart(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", summary_reply(topic="deploys"))
    with server.client() as client:
        client.append("s", conversation(("user", "We deploy on Fridays?"), ("assistant", "Never.")))
        assert client.get_summary("s").last_run is None
        before = time.time_ns()
        client.summarize("s", timeout=30)
        after = time.time_ns()
        run = client.get_summary("s").last_run
        assert (run.trigger, run.outcome, run.messages, run.reason, run.message) == (
            "summarize", "summarized", 2, "", "")
        assert before <= run.started_at_unix_nano <= run.finished_at_unix_nano <= after
    server.restart()
    with server.client() as client:
        assert client.get_summary("s").last_run == run
        client.append("s", [("user", "and on Mondays?")])  # waits for its reply: not summarized
        assert client.summarize("s").count == 0
        again = client.get_summary("s").last_run
        assert (again.trigger, again.outcome, again.messages) == ("summarize", "nothing_new", 0)
        assert again.started_at_unix_nano >= run.finished_at_unix_nano


@pytest.mark.parametrize(("reply", "reason"), [(error(500, "model crashed"), "LLM_UNAVAILABLE"),
                                               ("<summary>not json</summary>", "LLM_REPLY_UNPARSEABLE")])
def test_a_failing_llm_records_a_failed_run_with_the_stable_reason(make_server, llm_server, reply, reason):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", reply)
    with server.client() as client:
        client.append("s", conversation(("user", "the vault code is 4711"), ("assistant", "noted, 4711")))
        _, refused, message = status_of(lambda: client.summarize("s"))
        assert refused == reason
        stored = client.get_summary("s")
        run = stored.last_run
        assert (run.trigger, run.outcome, run.messages, run.reason) == ("summarize", "failed", 0, reason)
        assert run.message == message and "4711" not in run.message  # what the caller was told, no conversation
        assert stored.summary is None and stored.cursor_unix_nano == 0


def test_the_last_run_goes_with_the_summary_reset_all_and_removal_delete_it(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", *[summary_reply(topic="t")] * 3)
    with server.client() as client:
        for session in ("kept", "cleared", "removed"):
            client.append(session, [("user", "q"), ("assistant", "a")])
            client.summarize(session, timeout=30)
        client.reset("kept", mode="summary")
        assert client.get_summary("kept").last_run.outcome == "summarized"  # the summary it describes stays
        client.reset("cleared", mode="all")
        client.append("cleared", [("user", "again")])
        assert client.get_summary("cleared").last_run is None
        client.remove_session("removed")
        client.append("removed", [("user", "new")])
        assert client.get_summary("removed").last_run is None


def test_an_export_carries_the_last_run_to_the_importing_server(make_server, llm_server, tmp_path):
    first = make_server(*llm_flags(llm_server.base_url))
    second = make_server(directory=tmp_path / "second")
    llm_server.script("sum", summary_reply(topic="moves"))
    with first.client() as one, second.client() as two:
        one.append("s", [("user", "q"), ("assistant", "a")])
        one.summarize("s", timeout=30)
        run = one.get_summary("s").last_run
        head = next(iter(one.export_session("s"))).head
        assert head.summary_last_run == run
        two.import_session(one.export_session("s"))
        assert two.get_summary("s").last_run == run
