"""What an Append brings: the new messages, and the checks they pass before anything is stored.

Owns the shape of a message to store and its limits (roles, visible content,
sizes, sender, time, payload, idempotency key), which an imported message
passes too. Must never store anything: appending.py does, once these checks
pass.
"""

from __future__ import annotations

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import ROLES, Record, has_visible_text, utf8_size

MAX_SENDER_CHARS = 256
MAX_IDEMPOTENCY_KEY_CHARS = 256


class NewMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str
    sender: str = ""
    send_at: int = 0
    "UTC Unix nanoseconds; 0 means now (or the time in a legacy header)."
    embedding: list[float] = []
    "A client-supplied embedding; empty means the server's embedder makes one."
    payload: str = ""
    "Opaque JSON kept beside the content; empty when none."


def check_append(messages: list[NewMessage], idempotency_key: str, settings: Settings, *,
                 at_least_one: bool = True) -> None:
    """Raise INVALID_ARGUMENT for the first thing wrong with an Append (or, not `at_least_one`, with the new
    history of a ReplaceMessages, which may be empty)."""
    if at_least_one and not messages:
        raise InvalidArgument("messages is empty: send at least one message", reason=Reason.NO_MESSAGES)
    if len(messages) > settings.max_messages_per_request:
        raise InvalidArgument(
            f"{len(messages)} messages in one Append; at most {settings.max_messages_per_request}",
            reason=Reason.TOO_MANY_MESSAGES)
    for index, message in enumerate(messages):
        check_message(message, f"messages[{index}]", settings)
    check_idempotency_key(idempotency_key)


def check_message(message: NewMessage | Record, where: str, settings: Settings) -> None:
    """Raise INVALID_ARGUMENT for the first thing wrong with one message, new or (imported) stored."""
    if message.role not in ROLES:
        raise InvalidArgument(f"{where}.role must be one of {', '.join(ROLES)}", reason=Reason.INVALID_ROLE)
    if not has_visible_text(message.content):
        raise InvalidArgument(f"{where}.content is empty (or only whitespace, control or zero-width "
                              "characters)", reason=Reason.EMPTY_CONTENT)
    size = utf8_size(message.content)
    if size > settings.max_message_bytes:
        raise InvalidArgument(
            f"{where}.content is {size} bytes; at most {settings.max_message_bytes} "
            "(max_message_bytes): split it or store it elsewhere", reason=Reason.MESSAGE_TOO_LARGE)
    if len(message.sender) > MAX_SENDER_CHARS:
        raise InvalidArgument(f"{where}.sender is longer than {MAX_SENDER_CHARS} characters",
                              reason=Reason.SENDER_TOO_LONG)
    if message.send_at < 0:
        raise InvalidArgument(f"{where}.send_at_unix_nano is negative", reason=Reason.INVALID_TIME)
    if message.payload:
        _check_payload(message.payload, where, settings)


def check_idempotency_key(idempotency_key: str) -> None:
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
                              reason=Reason.IDEMPOTENCY_KEY_TOO_LONG)


def _check_payload(payload: str, where: str, settings: Settings) -> None:
    size = utf8_size(payload)
    if size > settings.max_message_bytes:
        raise InvalidArgument(f"{where}.payload_json is {size} bytes; at most {settings.max_message_bytes} "
                              "(max_message_bytes)", reason=Reason.PAYLOAD_TOO_LARGE)
    try:
        msgspec.json.decode(payload)
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested past msgspec's depth limit
        raise InvalidArgument(f"{where}.payload_json is not valid JSON ({exc})",
                              reason=Reason.INVALID_PAYLOAD) from None
