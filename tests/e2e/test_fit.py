"""FitContext end to end: a real memsvc server, a real chat-completions
server on loopback standing in for the summary model, and a real HTTP server
on loopback serving the model table, driven through the Python client."""

from __future__ import annotations

import json
import random
import time
from datetime import datetime

import grpc
import pytest

from memsvc.core.layout import CURSOR
from memsvc_client import FitContextResponse, MemsvcError
from tests.support import wait_for
from tests.support.llm_server import Reply, error, summary_reply

pytestmark = pytest.mark.in_process

SENT_AT = int(datetime(2025, 3, 1, 14, 0).timestamp()) * 1_000_000_000
MINUTE = 60 * 1_000_000_000
BIG = "alpha beta gamma delta " * 500  # about 2,000 tokens
SYSTEM = {"role": "system", "content": "You are a careful agent. Use the tools."}


def llm_flags(base_url: str, *extra: str) -> list[str]:
    return ["--llm-base-url", base_url, "--summary-model", "sum", "--llm-max-retries", "0", *extra]


def call(*calls: tuple[str, str, dict]) -> dict:
    """An assistant message making tool calls: (id, tool name, arguments)."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for call_id, name, args in calls]}


def result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def decoded(reply: FitContextResponse) -> list[dict]:
    return [json.loads(message) for message in reply.messages]


def stages(reply: FitContextResponse) -> list[tuple[str, str]]:
    return [(s.stage, s.outcome) for s in reply.stages]


def assert_no_split_exchange(messages: list[dict]) -> None:
    """Every tool result follows the assistant message that made its call, and every call kept its result."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls
    assert not open_calls


def stored_turns(client, session_id: str, *texts: str) -> list[dict]:
    """Append alternating user/assistant messages to the session; returns them as the agent holds them."""
    turns = [{"role": ("user", "assistant")[n % 2], "content": text} for n, text in enumerate(texts)]
    client.append(session_id, [{**turn, "send_at_unix_nano": SENT_AT + n * MINUTE} for n, turn in enumerate(turns)])
    return turns


def fit_error(call) -> MemsvcError:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value


# -- CheckThreshold ------------------------------------------------------------------


def test_a_run_under_budget_comes_back_byte_for_byte_after_one_count(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    sent = [json.dumps(SYSTEM), '{"role":"user",  "content":"list /srv", "x-client": {"trace": [1, 2]}}',
            json.dumps(call(("c1", "ls", {"path": "/srv"}))), json.dumps(result("c1", "a b c"))]
    with server.client() as client:
        reply = client.fit_context("s", "openai", "gpt-4o", sent)
    assert list(reply.messages) == sent  # unknown fields and the caller's own spacing survive
    assert stages(reply) == [("check_threshold", "unchanged")]
    assert (reply.fits, reply.changed) == (True, False)
    assert reply.tokens_before == reply.tokens_after > 0
    assert (reply.context_window, reply.window_source, reply.window_entry) == (
        128000, "shipped", "openai/gpt-4o")
    assert (reply.budget_tokens, reply.target_tokens) == (102400, 102400)
    assert (reply.counting, reply.tokenizer) == ("exact", "o200k_base")
    assert llm_server.calls() == []


def test_an_unknown_model_gets_128k_and_an_estimate_says_so(client):
    reply = client.fit_context("s", "acme", "rocket-9", [SYSTEM, {"role": "user", "content": "我們週五部署嗎？"}])
    assert (reply.context_window, reply.window_source, reply.window_entry) == (128000, "fallback", "")
    assert reply.budget_tokens == 102400
    assert reply.counting == "estimate" and reply.tokenizer.startswith("estimate")
    claude = client.fit_context("s", "anthropic", "claude-3-5-sonnet-20241022", [SYSTEM])
    assert (claude.context_window, claude.window_entry) == (200000, "anthropic/claude-3-5-sonnet")
    assert claude.counting == "estimate"
    mine = client.fit_context("s", "acme", "rocket-9", [SYSTEM], context_window=8000, reserved_tokens=400)
    assert (mine.window_source, mine.budget_tokens) == ("request", 6000)


def test_kept_messages_over_the_budget_are_failed_precondition_naming_the_sizes(client):
    huge = {"role": "system", "content": BIG}
    failure = fit_error(lambda: client.fit_context("s", "openai", "gpt-4o", [huge, {"role": "user", "content": "hi"}],
                                                   context_window=1000))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "CONTEXT_TOO_LARGE")
    assert "budget of 800" in failure.message and "1000-token window" in failure.message
    assert "never drops" in failure.message


@pytest.mark.parametrize("messages, words", [
    (["{not json"], "messages[0] is not JSON"),
    (['["a list"]'], "messages[0] is not a chat message (Expected `object`, got `array`)"),
    (['{"content": "no role"}'], "missing required field `role`"),
    (['{"role": "robot", "content": "beep"}'], "messages[0] has role 'robot'; a chat message's role is one of"),
    ([json.dumps(SYSTEM), '{"role": "user", "content": 7}'], "messages[1] is not a chat message"),
    ([json.dumps({"role": "assistant", "tool_calls": [{"id": "c1"}]})], "at `$.tool_calls[0]`"),
])
def test_messages_that_are_not_chat_messages_are_invalid_argument(client, messages, words):
    failure = fit_error(lambda: client.fit_context("s", "openai", "gpt-4o", messages))
    assert (failure.code, failure.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CHAT_MESSAGE")
    assert words in failure.message


def test_other_bad_requests_say_what_to_fix(client):
    cases = [(lambda: client.fit_context("..", "openai", "gpt-4o", [SYSTEM]), "INVALID_SESSION_ID"),
             (lambda: client.fit_context("s", "openai", "", [SYSTEM]), "MODEL_REQUIRED"),
             (lambda: client.fit_context("s", "openai", "gpt-4o", []), "NO_MESSAGES"),
             (lambda: client.fit_context("s", "openai", "gpt-4o", [SYSTEM], context_window=100,
                                         reserved_tokens=90), "NO_BUDGET")]
    for bad, reason in cases:
        failure = fit_error(bad)
        assert (failure.code, failure.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


# -- ExtractOldHistories, then ToolHistory -----------------------------------------------


def test_over_budget_the_older_turns_fold_into_the_summary_and_its_cursor(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", summary_reply(["Do: keep answers short"], topic="deploys"))
    with server.client() as client:
        older = stored_turns(client, "s", "We deploy on Fridays? " + BIG[:2000], "Never on Fridays. " + BIG[:2000],
                             "And hotfixes? " + BIG[:2000], "Hotfixes any day, with a review. " + BIG[:2000])
        question = {"role": "user", "content": "Check the deploy log for today."}
        client.append("s", [("user", question["content"])])
        tail = [call(("c1", "read_log", {"day": "today"})), result("c1", "deploy ok at 10:02")]
        sent = [SYSTEM, *older, question, *tail]
        reply = client.fit_context("s", "openai", "gpt-4o", sent, context_window=1500)

        assert stages(reply) == [("check_threshold", "unchanged"), ("extract_old_histories", "compacted")]
        assert reply.stages[1].messages_removed == 4
        assert reply.fits and reply.changed and reply.tokens_after < reply.target_tokens < reply.tokens_before
        messages = decoded(reply)
        assert messages[0] == SYSTEM and messages[2:] == [question, *tail]
        turn_context = messages[1]
        assert turn_context["role"] == "user" and turn_context["content"].startswith("Prior summary:")
        assert "Do: keep answers short" in turn_context["content"]

        [summary_call] = llm_server.calls("sum")
        assert "rolling summary" in summary_call.system
        assert "We deploy on Fridays?" in summary_call.user and "Hotfixes any day" in summary_call.user
        assert "Check the deploy log" not in summary_call.user  # the latest user message stays in the run

        stored = client.get_summary("s")
        assert list(stored.summary.key_decisions) == ["Do: keep answers short"]
        assert stored.cursor_unix_nano == SENT_AT + 3 * MINUTE  # the last folded message
        run = stored.last_run
        assert (run.trigger, run.outcome, run.messages, run.reason) == ("fit_context", "summarized", 4, "")
        assert client.get_context("s").turn_context.content == turn_context["content"]
        assert client.summarize("s").count == 0  # nothing summarized twice: the job has nothing left

        again = client.fit_context("s", "openai", "gpt-4o", list(reply.messages), context_window=1500)
        assert stages(again) == [("check_threshold", "unchanged")] and list(again.messages) == list(reply.messages)
        assert len(llm_server.calls("sum")) == 1


def words(count: int, seed: int) -> str:
    """Text of about 2 tokens and 8.4 characters a word (o200k_base): four such turns of 900 words fill one
    summary call of summary_chunk_chars (32,000)."""
    pick = random.Random(seed)
    return " ".join(pick.choice(["deploy", "cache", "node", "log", "shard", "disk"]) + str(pick.randrange(1000))
                    for _ in range(count))


def long_run(client, session_id: str) -> tuple[list[dict], dict]:
    """80 stored turns of about 1,800 tokens each and the latest question: about 145,000 tokens, far over
    gpt-4o's budget of 102,400 (80% of its 128K window)."""
    older = stored_turns(client, session_id, *[f"turn {n}: " + words(900, n) for n in range(80)])
    question = {"role": "user", "content": "What should we do next?"}
    client.append(session_id, [("user", question["content"])])
    return older, question


def folded_turns(llm_server) -> list[int]:
    """The turn numbers each summary call carried, in order of the calls."""
    return [int(line.split("turn ")[1].split(":")[0]) for call in llm_server.calls("sum")
            for line in call.user.splitlines() if "turn " in line]


def test_a_run_far_over_budget_is_folded_by_as_many_summary_calls_as_it_takes(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", *[summary_reply([f"Do: rule {n}"]) for n in range(16)])
    with server.client() as client:
        older, question = long_run(client, "s")
        reply = client.fit_context("s", "openai", "gpt-4o", [SYSTEM, *older, question])
        cursor = client.get_summary("s").cursor_unix_nano

    assert reply.tokens_before > 1.4 * reply.budget_tokens == 1.4 * 102400
    assert reply.fits and reply.unfit_reason == "" and reply.tokens_after <= reply.target_tokens
    assert stages(reply) == [("check_threshold", "unchanged"), ("extract_old_histories", "compacted")]
    calls = len(llm_server.calls("sum"))
    assert 1 < calls <= 16 and f"{calls} summary calls" in reply.stages[1].detail
    messages = decoded(reply)
    # The turn context sits where GetContext puts it: after the recent turns, ahead of the user input.
    assert messages[0] == SYSTEM and messages[-2]["content"].startswith("Prior summary:")
    assert messages[-1] == question
    kept = messages[1:-2]
    removed = reply.stages[1].messages_removed
    assert kept == older[removed:] and removed == len(older) - len(kept) > 0  # the oldest turns went
    assert folded_turns(llm_server) == list(range(removed))  # each once, oldest first, none left out
    assert cursor == SENT_AT + (removed - 1) * MINUTE


def test_past_the_summary_call_limit_the_reply_says_so_and_the_next_call_folds_more(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url, "--fit-max-summary-calls", "2"))
    llm_server.script("sum", *[summary_reply([f"Do: rule {n}"]) for n in range(16)])
    with server.client() as client:
        older, question = long_run(client, "s")
        sent = [json.dumps(message) for message in [SYSTEM, *older, question]]
        replies = []
        for _ in range(8):
            replies.append(client.fit_context("s", "openai", "gpt-4o", sent))
            if replies[-1].fits:
                break
            sent = list(replies[-1].messages)
    first = replies[0]
    assert not first.fits and first.unfit_reason == "SUMMARY_CALL_LIMIT"
    assert stages(first)[1] == ("extract_old_histories", "compacted")
    assert first.stages[1].reason == "SUMMARY_CALL_LIMIT" and "fit_max_summary_calls (2)" in first.stages[1].detail
    assert first.tokens_after < first.tokens_before
    assert all(r.unfit_reason == "SUMMARY_CALL_LIMIT" for r in replies[:-1]) and len(replies) > 1
    last = replies[-1]
    assert last.fits and last.unfit_reason == ""
    assert len(llm_server.calls("sum")) <= 2 * len(replies)
    assert folded_turns(llm_server) == list(range(len(folded_turns(llm_server))))  # never a turn twice
    assert decoded(last)[1:-2] == older[len(folded_turns(llm_server)):]


def test_folding_stops_before_a_call_that_would_end_past_the_deadline(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", *[Reply(summary_reply([f"Do: rule {n}"]), delay=2.0) for n in range(16)])
    with server.client() as client:
        older, question = long_run(client, "s")
        sent = [SYSTEM, *older, question]
        assert client.fit_context("s", "openai", "gpt-4o", sent, context_window=1_000_000).fits  # counted once
        reply = client.fit_context("s", "openai", "gpt-4o", sent, timeout=5)
    # Calls of 2 s each, about six needed: the ones that could end before the 5 s deadline were made, and the
    # reply came in time with what they folded.
    assert 1 <= len(llm_server.calls("sum")) <= 2
    assert not reply.fits and reply.unfit_reason == "DEADLINE_TOO_SHORT" == reply.stages[1].reason
    assert reply.stages[1].outcome == "compacted" and reply.tokens_after < reply.tokens_before


def test_the_same_request_again_adds_nothing_so_clients_may_retry_it(make_server, llm_server, data_dir):
    """What FitContext's idempotency_level (IDEMPOTENT) promises: a retry after a lost reply."""
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", summary_reply(["Do: keep answers short"]))
    session = data_dir / "sessions" / "s"
    with server.client() as client:
        older = stored_turns(client, "s", "We deploy on Fridays? " + BIG[:2000], "Never on Fridays. " + BIG[:2000])
        question = {"role": "user", "content": "Check the deploy log for today."}
        client.append("s", [("user", question["content"])])
        sent = [SYSTEM, *older, question]
        first = client.fit_context("s", "openai", "gpt-4o", sent, context_window=800)
        stored = (session / "summary.json").read_bytes(), (session / CURSOR).read_bytes()
        again = client.fit_context("s", "openai", "gpt-4o", sent, context_window=800)
    assert stages(first)[1:] == [("extract_old_histories", "compacted")] and first.fits
    assert again.messages == first.messages and stages(again) == stages(first)
    assert "no call: already summarized" in again.stages[1].detail
    assert len(llm_server.calls("sum")) == 1
    assert ((session / "summary.json").read_bytes(), (session / CURSOR).read_bytes()) == stored


def test_still_over_the_oldest_tool_exchanges_become_one_message_never_split(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", summary_reply(["Do: cite file paths"]),
                      "config.yaml sets port 8080; /srv holds app, data and logs; the log shows one restart.")
    with server.client() as client:
        older = stored_turns(client, "s", "Where do we keep configs? " + BIG[:1500], "In /etc/app. " + BIG[:1500])
        question = {"role": "user", "content": "Why did the app restart last night?"}
        parallel = call(("c1", "read_file", {"path": "config.yaml"}), ("c2", "list_dir", {"path": "/srv"}))
        exchanges = [[parallel, result("c1", "port: 8080\n" + BIG), result("c2", "app data logs\n" + BIG)],
                     [call(("c3", "read_log", {"name": "app"})), result("c3", "restart at 02:13\n" + BIG)],
                     [call(("c4", "read_log", {"name": "kernel"})), result("c4", "oom-killer at 02:13\n" + BIG)],
                     [call(("c5", "uptime", {})), result("c5", "up 9 hours")]]
        sent = [SYSTEM, *older, question, *[message for exchange in exchanges for message in exchange]]
        reply = client.fit_context("s", "openai", "gpt-4o", sent, context_window=3750)

    assert stages(reply) == [("check_threshold", "unchanged"), ("extract_old_histories", "compacted"),
                             ("tool_history", "compacted")]
    assert reply.fits and reply.stages[2].messages_removed == 5
    messages = decoded(reply)
    assert messages[0] == SYSTEM and messages[1]["content"].startswith("Prior summary:")
    assert messages[2] == question
    summary = messages[3]
    assert summary["role"] == "user" and "port 8080" in summary["content"]
    assert summary["content"].startswith("[Earlier tool calls of this run, summarized by memsvc")
    assert messages[4:] == exchanges[2] + exchanges[3]  # the newest exchanges stay as they were
    assert_no_split_exchange(messages)

    summary_call, tool_call = llm_server.calls("sum")
    assert "working memory of an AI agent" in tool_call.system and "Why did the app restart" in tool_call.system
    for text in ("[call read_file]", "[call list_dir]", "[result read_file] port: 8080", "[result list_dir] app data",
                 "[result read_log] restart at 02:13"):
        assert text in tool_call.user
    assert "oom-killer" not in tool_call.user


def test_with_no_llm_the_llm_stages_are_skipped_and_the_reply_says_so(client):
    sent = [SYSTEM, {"role": "user", "content": "go"}, call(("c1", "dump", {})), result("c1", BIG)]
    reply = client.fit_context("s", "openai", "gpt-4o", sent, context_window=1000)
    assert stages(reply) == [("check_threshold", "unchanged"), ("extract_old_histories", "skipped"),
                             ("tool_history", "skipped")]
    assert {s.reason for s in reply.stages[1:]} == {"LLM_NOT_CONFIGURED"}
    assert "summary_model" in reply.stages[1].detail
    assert not reply.fits and not reply.changed and decoded(reply) == sent


def test_a_failing_llm_never_loses_the_callers_messages(make_server, llm_server, data_dir):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", error(500, "model crashed"), error(503, "overloaded"))
    with server.client() as client:
        older = stored_turns(client, "s", "Old question " + BIG, "Old answer " + BIG)
        sent = [json.dumps(m) for m in [SYSTEM, *older, {"role": "user", "content": "go"}, call(("c1", "dump", {})),
                                        result("c1", BIG)]]
        reply = client.fit_context("s", "openai", "gpt-4o", sent, context_window=3000)
        assert list(reply.messages) == sent and not reply.changed and not reply.fits
        assert stages(reply)[1:] == [("extract_old_histories", "failed"), ("tool_history", "failed")]
        assert [s.reason for s in reply.stages[1:]] == ["LLM_UNAVAILABLE", "LLM_UNAVAILABLE"]
        assert "model crashed" in reply.stages[1].detail and "kept as they were" in reply.stages[1].detail
        assert client.get_summary("s").summary is None and client.get_summary("s").cursor_unix_nano == 0
        run = client.get_summary("s").last_run
        assert (run.trigger, run.outcome, run.messages, run.reason) == ("fit_context", "failed", 0, "LLM_UNAVAILABLE")
    assert not (data_dir / "sessions" / "s" / "summary.json").exists()


def test_a_session_with_nothing_stored_skips_the_fold_but_not_tool_history(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    llm_server.script("sum", "dumped the database: 3 tables, 12 rows.")
    sent = [SYSTEM, {"role": "user", "content": "earlier ask " + BIG}, {"role": "assistant", "content": "done"},
            {"role": "user", "content": "now dump it"}, call(("c1", "dump", {})), result("c1", BIG),
            call(("c2", "count", {})), result("c2", "12")]
    with server.client() as client:
        reply = client.fit_context("fresh", "openai", "gpt-4o", sent, context_window=4000)
    assert stages(reply)[1:] == [("extract_old_histories", "skipped"), ("tool_history", "compacted")]
    assert reply.stages[1].reason == "SESSION_NOT_FOUND"
    assert_no_split_exchange(decoded(reply))


# -- TrimFallback ---------------------------------------------------------------------


def test_overflow_with_nothing_to_summarize_drops_the_oldest_exchange(client):
    question = {"role": "user", "content": "summarize the logs"}
    first, second = [call(("c1", "read_log", {})), result("c1", BIG)], [call(("c2", "tail", {})), result("c2", "ok")]
    sent = [SYSTEM, question, *first, *second]
    reply = client.fit_context("s", "openai", "gpt-4o", sent, overflow=True)
    assert stages(reply) == [("check_threshold", "unchanged"), ("extract_old_histories", "skipped"),
                             ("tool_history", "skipped"), ("trim_fallback", "compacted")]
    assert reply.target_tokens == int(reply.tokens_before * 0.8) < reply.budget_tokens
    assert decoded(reply) == [SYSTEM, question, *second] and reply.stages[3].messages_removed == 2

    again = client.fit_context("s", "openai", "gpt-4o", list(reply.messages), overflow=True)
    assert decoded(again) == [SYSTEM, question]
    failure = fit_error(lambda: client.fit_context("s", "openai", "gpt-4o", list(again.messages), overflow=True))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "CONTEXT_TOO_LARGE")
    assert "nothing is left to compact" in failure.message and "context_window" in failure.message


def test_overflow_with_an_llm_and_nothing_it_can_summarize_drops_without_calling_it(make_server, llm_server):
    server = make_server(*llm_flags(llm_server.base_url))
    sent = [SYSTEM, {"role": "user", "content": "think"}, {"role": "assistant", "content": "step one " + BIG},
            {"role": "assistant", "content": "step two"}]
    with server.client() as client:
        reply = client.fit_context("s", "openai", "gpt-4o", sent, overflow=True)
    assert stages(reply)[1:] == [("extract_old_histories", "unchanged"), ("tool_history", "unchanged"),
                                 ("trim_fallback", "compacted")]
    assert decoded(reply) == [sent[0], sent[1], sent[3]]
    assert llm_server.calls() == []


# -- RawToolFallback ------------------------------------------------------------------


def test_a_model_switch_gets_the_tool_history_as_plain_text(client):
    assistant = {**call(("c1", "read_file", {"path": "a.txt"})), "content": "Reading it.", "x-trace": "t1"}
    sent = [SYSTEM, {"role": "user", "content": "what is in a.txt?"}, assistant, result("c1", "hello")]
    reply = client.fit_context("s", "openai", "gpt-4o", sent, previous_model="claude-3-5-sonnet")
    assert stages(reply) == [("check_threshold", "unchanged"), ("raw_tool_fallback", "compacted")]
    messages = decoded(reply)
    assert messages[:2] == sent[:2]
    assert messages[2] == {"role": "assistant", "x-trace": "t1",
                           "content": 'Reading it.\n[tool call read_file id=c1] {"path": "a.txt"}'}
    assert messages[3] == {"role": "user", "content": "[tool result read_file id=c1]\nhello"}
    assert all("tool_calls" not in m and m["role"] != "tool" for m in messages)
    same = client.fit_context("s", "openai", "gpt-4o", sent, previous_model="GPT-4o")
    assert stages(same) == [("check_threshold", "unchanged")] and decoded(same) == sent


# -- the model table ------------------------------------------------------------------


def table(window: int) -> dict:
    return {"acme": {"rocket-1": {"in": window, "out": 4096}}, "claude": {"claude-x": {"in": 300000}}}


def window_of(client, model: str = "rocket-1", vendor: str = "acme") -> tuple[int, int, str]:
    reply = client.fit_context("s", vendor, model, [SYSTEM])
    return reply.context_window, reply.window_source, reply.window_entry


def test_the_table_is_fetched_once_an_hour_and_survives_a_restart_offline(make_server, json_server, data_dir):
    url = json_server.serve("/table.json", table(50000))
    server = make_server("--model-table-url", url)
    with server.client() as client:
        wait_for(lambda: window_of(client)[1] == "fetched", timeout=30)
        assert window_of(client) == (50000, "fetched", "acme/rocket-1")
        assert window_of(client, "claude-x", "anthropic")[0] == 300000  # the reference's vendor names alias
        assert window_of(client, "gpt-4o", "openai")[1] == "shipped"  # merged over the shipped table
        for _ in range(20):
            window_of(client)
    assert json_server.count("/table.json") == 1
    assert server.terminate() == 0
    copies = list((data_dir / ".store").glob("model_table.*.json"))
    assert len(copies) == 1 and json.loads(copies[0].read_bytes()) == table(50000)

    again = make_server("--model-table-url", url)  # within the hour: the copy on disk is fresh, nothing fetched
    with again.client() as client:
        assert window_of(client) == (50000, "fetched", "acme/rocket-1")
    assert again.terminate() == 0
    assert json_server.count("/table.json") == 1

    json_server.serve("/table.json", status=503)  # offline, and the copy is older than the period
    offline = make_server("--model-table-url", url, "--model-table-refresh-seconds", "0.01")
    with offline.client() as client:
        assert window_of(client) == (50000, "fetched", "acme/rocket-1")
        wait_for(lambda: any("model table fetch failed" in line for line in offline.log_lines), timeout=30)
        assert window_of(client) == (50000, "fetched", "acme/rocket-1")
    assert json.loads(copies[0].read_bytes()) == table(50000)  # a failed fetch never replaces the good copy


def test_a_changed_table_is_picked_up_at_the_next_period_and_no_sooner(make_server, json_server):
    url = json_server.serve("/table.json", table(50000))
    server = make_server("--model-table-url", url, "--model-table-refresh-seconds", "1")
    started = time.monotonic()
    with server.client() as client:
        wait_for(lambda: window_of(client)[0] == 50000, timeout=30)
        json_server.serve("/table.json", table(60000))
        wait_for(lambda: window_of(client)[0] == 60000, timeout=30)
        json_server.serve("/table.json", raw=b'{"acme": "not a table"}')  # invalid: the good one stays
        time.sleep(2.5)
        assert window_of(client) == (60000, "fetched", "acme/rocket-1")
    elapsed = time.monotonic() - started
    assert 3 <= json_server.count("/table.json") <= elapsed / 1 + 1


def test_a_slow_table_never_holds_up_a_request(make_server, json_server):
    url = json_server.serve("/table.json", table(50000), delay=5)
    server = make_server("--model-table-url", url)
    with server.client() as client:
        wait_for(lambda: json_server.count("/table.json") == 1, timeout=30)  # the fetch is hanging now
        reply = client.fit_context("s", "acme", "rocket-1", [SYSTEM], timeout=2)
        assert reply.window_source == "fallback"
        wait_for(lambda: window_of(client)[1] == "fetched", timeout=30)


def test_an_endpoints_models_list_fills_what_the_table_lacks(make_server, json_server):
    json_server.serve("/v1/models", {"object": "list", "data": [
        {"id": "Qwen/Qwen2.5-7B-Instruct-local", "max_model_len": 16384},
        {"id": "gpt-4o", "context_length": 999},  # the table's entry wins: the endpoint only fills gaps
        {"id": "openrouter-thing", "context_length": 65536}]})
    server = make_server("--model-info-base-url", json_server.base_url + "/v1")
    with server.client() as client:
        wait_for(lambda: window_of(client, "openrouter-thing", "openrouter")[1] == "endpoint",
                 timeout=30)
        assert window_of(client, "Qwen/Qwen2.5-7B-Instruct-local", "vllm") == (
            16384, "endpoint", "qwen/qwen2.5-7b-instruct-local")
        assert window_of(client, "gpt-4o", "openai") == (128000, "shipped", "openai/gpt-4o")
