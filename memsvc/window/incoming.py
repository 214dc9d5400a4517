"""What an Append brings: the new messages, and the checks they pass before anything is stored.

Owns the shape of a message to store and its limits (roles, visible content,
sizes, sender, time, payload, idempotency key). Must never store anything: sessions.py
does, once these checks pass.
"""

from __future__ import annotations

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidArgument
from memsvc.core.records import ROLES, has_visible_text

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


def check_append(messages: list[NewMessage], idempotency_key: str, settings: Settings) -> None:
    """Raise INVALID_ARGUMENT for the first thing wrong with an Append."""
    if not messages:
        raise InvalidArgument("messages is empty: send at least one message", reason="NO_MESSAGES")
    if len(messages) > settings.max_messages_per_request:
        raise InvalidArgument(
            f"{len(messages)} messages in one Append; at most {settings.max_messages_per_request}",
            reason="TOO_MANY_MESSAGES")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.role not in ROLES:
            raise InvalidArgument(f"{where}.role must be one of {', '.join(ROLES)}", reason="INVALID_ROLE")
        if not has_visible_text(message.content):
            raise InvalidArgument(f"{where}.content is empty (or only whitespace, control or zero-width "
                                  "characters)", reason="EMPTY_CONTENT")
        size = len(message.content.encode("utf-8", "surrogatepass"))
        if size > settings.max_message_bytes:
            raise InvalidArgument(
                f"{where}.content is {size} bytes; at most {settings.max_message_bytes} "
                "(max_message_bytes): split it or store it elsewhere", reason="MESSAGE_TOO_LARGE")
        if len(message.sender) > MAX_SENDER_CHARS:
            raise InvalidArgument(f"{where}.sender is longer than {MAX_SENDER_CHARS} characters",
                                  reason="SENDER_TOO_LONG")
        if message.send_at < 0:
            raise InvalidArgument(f"{where}.send_at_unix_nano is negative", reason="INVALID_TIME")
        if message.payload:
            _check_payload(message.payload, where, settings)
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
                              reason="IDEMPOTENCY_KEY_TOO_LONG")


def _check_payload(payload: str, where: str, settings: Settings) -> None:
    size = len(payload.encode("utf-8", "surrogatepass"))
    if size > settings.max_message_bytes:
        raise InvalidArgument(f"{where}.payload_json is {size} bytes; at most {settings.max_message_bytes} "
                              "(max_message_bytes)", reason="PAYLOAD_TOO_LARGE")
    try:
        msgspec.json.decode(payload)
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested past msgspec's depth limit
        raise InvalidArgument(f"{where}.payload_json is not valid JSON ({exc})", reason="INVALID_PAYLOAD") from None
