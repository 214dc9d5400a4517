"""The OpenAI chat-completions message shape, as FitContext reads and writes it.

Owns decoding a run's messages (one JSON object each) and checking them,
what a message is (a system message, the turn context, a tool call, a tool
result, memsvc's own summary of earlier tool calls), its text, and the
plain-text forms of tool calls and results: for a model that cannot read the
structured ones, and for the models that summarize them. A message nothing
changed keeps the exact text it came in. Must never decide what to compact:
the stages do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from memsvc.core.errors import InvalidArgument
from memsvc.summary.llm import shortened
from memsvc.summary.rolling import TURN_CONTEXT_PREFIX

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
SYSTEM_ROLES = ("system", "developer")
RESULT_ROLES = ("tool", "function")
"`function` is the result role of the legacy `function_call` API."
TOOL_HISTORY_HEADER = "[Earlier tool calls of this run, summarized by memsvc to fit the context window]"
"How memsvc's summary of earlier tool calls starts: a later FitContext folds it into the next one."
_CALL_KEYS = ("tool_calls", "function_call")
_RESULT_KEYS = ("tool_call_id", "name")
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class Call(msgspec.Struct, frozen=True, gc=False):
    id: str
    name: str
    arguments: str


class ChatMessage(msgspec.Struct, frozen=True):
    raw: str
    "The JSON object as it came, or as memsvc wrote it."
    data: dict[str, Any]
    role: str
    text: str
    "The content's text: the string, or its text parts joined."
    parts: int
    "Content parts other than text (images, audio, files)."
    calls: tuple[Call, ...]
    "The tool calls of an assistant message (or its legacy function_call)."
    call_id: str
    "The tool_call_id of a tool result."

    @property
    def is_system(self) -> bool:
        return self.role in SYSTEM_ROLES

    @property
    def is_result(self) -> bool:
        return self.role in RESULT_ROLES

    @property
    def is_turn_context(self) -> bool:
        return self.role == "user" and self.text.startswith(TURN_CONTEXT_PREFIX)

    @property
    def is_tool_summary(self) -> bool:
        return self.role == "user" and self.text.startswith(TOOL_HISTORY_HEADER)

    @property
    def is_user_input(self) -> bool:
        """A message the user wrote (not memsvc's turn context or tool summary)."""
        return self.role == "user" and not (self.is_turn_context or self.is_tool_summary)


def decode(texts: Sequence[str]) -> list[ChatMessage]:
    """The run's messages; INVALID_ARGUMENT naming the first that is not a chat message."""
    if not texts:
        raise InvalidArgument("messages is empty: send the run's messages, oldest first", reason="NO_MESSAGES")
    return [_checked(index, text) for index, text in enumerate(texts)]


def new(role: str, content: str, like: ChatMessage | None = None, drop: Sequence[str] = ()) -> ChatMessage:
    """A message memsvc writes; with `like`, its other fields (less `drop`) are kept."""
    data = {key: value for key, value in like.data.items() if key not in drop} if like is not None else {}
    data["role"], data["content"] = role, content
    return _checked(0, _encode(data).decode())


def plain(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """RawToolFallback: tool calls and results as plain text, for a model that did not make them.

    An assistant message keeps its text and lists its calls; a result
    becomes a user message naming its tool. Other messages are unchanged.
    """
    names = _tool_names(messages)
    rendered = []
    for message in messages:
        if message.calls:
            lines = [message.text] if message.text else []
            lines += [f"[tool call {call.name} id={call.id}] {call.arguments}" for call in message.calls]
            rendered.append(new("assistant", "\n".join(lines), message, drop=_CALL_KEYS))
        elif message.is_result:
            name = names.get(message.call_id, message.data.get("name", "tool"))
            rendered.append(new("user", f"[tool result {name} id={message.call_id}]\n{message.text}", message,
                                drop=_RESULT_KEYS))
        else:
            rendered.append(message)
    return rendered


def transcript(messages: Sequence[ChatMessage], max_chars: int) -> list[str]:
    """Each message as text for a summarizing model, one line per call, each line at most `max_chars`."""
    names = _tool_names(messages)
    texts = []
    for message in messages:
        if message.is_tool_summary:
            lines = ["[earlier summary] " + message.text[len(TOOL_HISTORY_HEADER):].strip()]
        else:
            who = "result " + names.get(message.call_id, "tool") if message.is_result else message.role
            lines = [f"[{who}] {message.text}"] if message.text or not message.calls else []
            lines += [f"[call {call.name}] {call.arguments}" for call in message.calls]
        texts.append("\n".join(shortened(line, max_chars) for line in lines))
    return texts


def _tool_names(messages: Sequence[ChatMessage]) -> dict[str, str]:
    return {call.id: call.name for message in messages for call in message.calls}


def _checked(index: int, text: str) -> ChatMessage:
    where = f"messages[{index}]"
    try:
        data = _decode(text)
    except msgspec.DecodeError as exc:
        raise _invalid(f"{where} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _invalid(f"{where} is not a JSON object")
    role = data.get("role")
    if role not in ROLES:
        raise _invalid(f"{where} has role {role!r}; a chat message's role is one of {', '.join(ROLES)}")
    text_content, parts = _content(where, data.get("content"))
    call_id = data.get("tool_call_id", "")
    if not isinstance(call_id, str):
        raise _invalid(f"{where}.tool_call_id is not a string")
    return ChatMessage(raw=text, data=data, role=role, text=text_content, parts=parts,
                       calls=_calls(where, data) if role == "assistant" else (), call_id=call_id)


def _content(where: str, content: Any) -> tuple[str, int]:
    if content is None or isinstance(content, str):
        return content or "", 0
    if not isinstance(content, list) or not all(isinstance(part, dict) for part in content):
        raise _invalid(f"{where}.content is neither a string nor a list of content parts")
    texts = [part.get("text") for part in content if part.get("type") == "text"]
    if not all(isinstance(text, str) for text in texts):
        raise _invalid(f"{where}.content has a text part whose text is not a string")
    return "\n".join(texts), len(content) - len(texts)


def _calls(where: str, data: dict[str, Any]) -> tuple[Call, ...]:
    raw = data.get("tool_calls") or []
    legacy = data.get("function_call")
    if legacy:
        raw = [*raw, {"id": "", "function": legacy}] if isinstance(raw, list) else raw
    if not isinstance(raw, list):
        raise _invalid(f"{where}.tool_calls is not a list")
    calls = []
    for number, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise _invalid(f"{where}.tool_calls[{number}] has no function object")
        name, arguments, call_id = function.get("name", ""), function.get("arguments", ""), call.get("id", "")
        if not isinstance(arguments, str):  # some servers send the arguments as an object
            arguments = _encode(arguments).decode()
        if not (isinstance(name, str) and isinstance(call_id, str)):
            raise _invalid(f"{where}.tool_calls[{number}] has a name or id that is not a string")
        calls.append(Call(call_id, name, arguments))
    return tuple(calls)


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(message + " (each message is one JSON object in the chat-completions shape)",
                           reason="INVALID_CHAT_MESSAGE")
