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
from memsvc.core.reasons import Reason
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


class _Function(msgspec.Struct):
    name: str = ""
    arguments: str | dict[str, Any] = ""
    "Some servers send the arguments as an object rather than as its JSON text."


class _ToolCall(msgspec.Struct):
    function: _Function
    id: str = ""


class _Part(msgspec.Struct):
    type: str = ""
    text: str | None = None


class _Shape(msgspec.Struct):
    """The fields memsvc reads; msgspec checks their types, the others stay in the raw text."""

    role: str
    content: str | list[_Part] | None = None
    tool_calls: list[_ToolCall] | None = None
    function_call: _Function | None = None
    tool_call_id: str = ""
    name: str | None = None


_decode_shape = msgspec.json.Decoder(_Shape).decode


class ChatMessage(msgspec.Struct, frozen=True):
    raw: str
    "The JSON object as it came, or as memsvc wrote it."
    role: str
    text: str
    "The content's text: the string, or its text parts joined."
    parts: int
    "Content parts other than text (images, audio, files)."
    calls: tuple[Call, ...]
    "The tool calls of an assistant message (or its legacy function_call)."
    call_id: str
    "The tool_call_id of a tool result."
    name: str
    "The optional participant name (or the legacy result's function name)."

    @property
    def data(self) -> dict[str, Any]:
        """Every field, unknown ones included."""
        decoded: dict[str, Any] = _decode(self.raw)
        return decoded

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
        raise InvalidArgument("messages is empty: send the run's messages, oldest first", reason=Reason.NO_MESSAGES)
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
            name = names.get(message.call_id, message.name or "tool")
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
        shape = _decode_shape(text)
    except msgspec.ValidationError as exc:
        raise _invalid(f"{where} is not a chat message ({exc})") from None
    except msgspec.DecodeError as exc:
        raise _invalid(f"{where} is not JSON ({exc})") from None
    if shape.role not in ROLES:
        raise _invalid(f"{where} has role {shape.role[:40]!r}; a chat message's role is one of {', '.join(ROLES)}")
    content, parts = shape.content, 0
    if isinstance(content, list):
        texts = [part.text or "" for part in content if part.type == "text"]
        content, parts = "\n".join(texts), len(content) - len(texts)
    return ChatMessage(raw=text, role=shape.role, text=content or "", parts=parts,
                       calls=_calls(shape) if shape.role == "assistant" else (), call_id=shape.tool_call_id,
                       name=shape.name or "")


def _calls(shape: _Shape) -> tuple[Call, ...]:
    raw = list(shape.tool_calls or [])
    if shape.function_call is not None:
        raw.append(_ToolCall(shape.function_call))
    return tuple(Call(call.id, call.function.name, call.function.arguments if isinstance(call.function.arguments, str)
                      else _encode(call.function.arguments).decode()) for call in raw)


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(message + " (each message is one JSON object in the chat-completions shape)",
                           reason=Reason.INVALID_CHAT_MESSAGE)
