"""The message record every tier stores: one message of a session.

Owns its fields and their names on disk (history.json's `sendAt`,
`idempotencyKey`) and the roles a message may have. Must never know where a
record is kept.
"""

from __future__ import annotations

import msgspec

ROLES = ("user", "assistant")


class Record(msgspec.Struct, omit_defaults=True, gc=False,
             rename={"send_at": "sendAt", "idempotency_key": "idempotencyKey"}):
    """One message as stored in history.json."""

    id: int = 0
    role: str = ""
    content: str = ""
    send_at: int = 0
    "UTC Unix nanoseconds."
    sender: str = ""
    idempotency_key: str = ""
    "Set on every record of an Append that carried a key, so a retry finds its first result."
