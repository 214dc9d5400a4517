"""The chat-completions shape: what a message is, and its plain-text forms."""

from __future__ import annotations

import json

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.fit import chat


def messages(*data: dict) -> list[chat.ChatMessage]:
    return chat.decode([json.dumps(item) for item in data])


CALLS = {"role": "assistant", "content": "Looking.", "x-trace": 7, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}},
    {"id": "c2", "type": "function", "function": {"name": "list", "arguments": {"dir": "/"}}}]}


def test_a_message_keeps_the_text_it_came_in_and_says_what_it_is():
    raw = '{"role":"user",   "content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{}}]}'
    [message] = chat.decode([raw])
    assert (message.raw, message.text, message.parts, message.is_user_input) == (raw, "hi", 1, True)
    [calls, tool, turn, summary, system] = messages(
        CALLS, {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "user", "content": "Prior summary:\n```json\n{}\n```"},
        {"role": "user", "content": chat.TOOL_HISTORY_HEADER + "\nsomething"}, {"role": "developer", "content": "d"})
    assert [c.name for c in calls.calls] == ["read", "list"] and calls.calls[1].arguments == '{"dir":"/"}'
    assert tool.is_result and tool.call_id == "c1"
    assert turn.is_turn_context and not turn.is_user_input
    assert summary.is_tool_summary and not summary.is_user_input
    assert system.is_system


def test_legacy_function_calls_read_as_tool_calls():
    [message] = messages({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}})
    assert message.calls == (chat.Call("", "f", "{}"),)


@pytest.mark.parametrize("data", [{"role": "user", "content": {"a": 1}},
                                  {"role": "user", "content": [{"type": "text", "text": 3}]},
                                  {"role": "tool", "tool_call_id": 5, "content": ""},
                                  {"role": "assistant", "tool_calls": "x"},
                                  {"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}])
def test_shapes_that_are_not_chat_messages_are_refused(data):
    with pytest.raises(InvalidArgument) as caught:
        messages(data)
    assert caught.value.reason == "INVALID_CHAT_MESSAGE" and "messages[0] is not a chat message" in caught.value.message


def test_plain_writes_calls_and_results_as_text_and_keeps_other_fields():
    run = messages({"role": "user", "content": "go"}, CALLS,
                   {"role": "tool", "tool_call_id": "c1", "content": "A", "x-id": 1},
                   {"role": "function", "name": "legacy", "content": "B"})
    rendered = chat.plain(run)
    assert rendered[0] is run[0]
    assert rendered[1].data == {"role": "assistant", "x-trace": 7, "content": (
        'Looking.\n[tool call read id=c1] {"path": "a"}\n[tool call list id=c2] {"dir":"/"}')}
    assert rendered[2].data == {"role": "user", "x-id": 1, "content": "[tool result read id=c1]\nA"}
    assert rendered[3].data == {"role": "user", "content": "[tool result legacy id=]\nB"}
    assert json.loads(rendered[1].raw) == rendered[1].data


def test_transcript_names_each_results_tool_and_shortens_long_lines():
    run = messages(CALLS, {"role": "tool", "tool_call_id": "c2", "content": "x" * 1000},
                   {"role": "user", "content": chat.TOOL_HISTORY_HEADER + "\nbefore"})
    texts = chat.transcript(run, 100)
    assert texts[0] == '[assistant] Looking.\n[call read] {"path": "a"}\n[call list] {"dir":"/"}'
    assert texts[1].startswith("[result list] xxx") and "characters left out" in texts[1] and len(texts[1]) <= 100
    assert texts[2] == "[earlier summary] before"
