"""A run's kept messages, its exchanges and its edits."""

from __future__ import annotations

import json

from memsvc.fit import chat
from memsvc.fit.run import Run
from memsvc.fit.tokens import REPLY_PRIMING, Counter


def run_of(*data: dict) -> Run:
    return Run(chat.decode([json.dumps(item) for item in data]), Counter("gpt-4o"))


def call(*ids: str) -> dict:
    return {"role": "assistant", "tool_calls": [{"id": i, "function": {"name": "t", "arguments": "{}"}} for i in ids]}


def result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


SYSTEM = {"role": "system", "content": "s"}
TURN = {"role": "user", "content": "Prior summary:\n```json\n{}\n```"}


def test_the_latest_user_message_splits_older_turns_from_the_tail():
    run = run_of(SYSTEM, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                 {"role": "user", "content": "q2"}, call("c0"), result("c0"), TURN,
                 {"role": "user", "content": "now"}, call("c1", "c2"), result("c1"), result("c2"),
                 {"role": "assistant", "content": "thinking"}, call("c3"), result("c3"),
                 {"role": "user", "content": chat.TOOL_HISTORY_HEADER})
    assert run.latest_user == 7
    assert run.older() == [[1, 2], [3, 4, 5]]
    assert run.tail() == [[8, 9, 10], [11], [12, 13], [14]]
    kept = [index for index in range(len(run.messages)) if run.kept(index, run.latest_user)]
    assert kept == [0, 6, 7]
    assert run.total == REPLY_PRIMING + sum(run.tokens) and run.kept_tokens() < run.total


def test_a_run_without_a_user_message_is_all_tail():
    run = run_of(SYSTEM, call("c1"), result("c1"))
    assert (run.latest_user, run.older(), run.tail()) == (-1, [], [[1, 2]])


def test_replace_puts_one_message_in_place_of_several_and_recounts():
    run = run_of(SYSTEM, {"role": "user", "content": "now"}, call("c1"), result("c1"), call("c2"), result("c2"))
    summary = chat.new("user", chat.TOOL_HISTORY_HEADER + "\ndone")
    assert run.replace([2, 3], summary) == 2
    assert [m.text for m in run.messages][:3] == ["s", "now", summary.text] and len(run.messages) == 5
    assert run.total == REPLY_PRIMING + sum(run.tokens) == REPLY_PRIMING + sum(
        Counter("gpt-4o").message(m) for m in run.messages)
    assert run.replace([4, 3]) == 2 and len(run.messages) == 3


def test_the_turn_context_is_rewritten_in_place_or_put_before_the_latest_user_message():
    run = run_of(SYSTEM, {**TURN, "x-keep": 1}, {"role": "user", "content": "now"})
    run.set_turn_context("Prior summary:\nnew")
    assert run.messages[1].data == {"role": "user", "x-keep": 1, "content": "Prior summary:\nnew"}
    fresh = run_of(SYSTEM, {"role": "assistant", "content": "a"}, {"role": "user", "content": "now"})
    fresh.set_turn_context("Prior summary:\nnew")
    assert [m.role for m in fresh.messages] == ["system", "assistant", "user", "user"]
    assert fresh.messages[2].is_turn_context and fresh.latest_user == 3
