"""The byte budget of a reply that carries messages (max_reply_bytes), and what a reply does past it.

Owns the size a message costs in a reply, counted from above (its texts'
UTF-8 bytes and a fixed allowance for ids, times, tags and framing, more than
protobuf ever spends), the choice of the newest messages that fit, and the
error naming a message that alone does not fit. Every read that returns
stored messages (GetContext, Search, ListMessages, DeleteMessages' echo)
counts through here, so no reply a default client can ask for is refused
by its 4 MiB receive limit. Must never build a transport's reply.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from memsvc.core.errors import FailedPrecondition
from memsvc.core.reasons import Reason
from memsvc.core.records import Record, utf8_size

MESSAGE_OVERHEAD = 96
"""Bytes a message costs in a reply besides its texts: protobuf spends at most ~70 (the repeated field's tag
and length, id and send time as 10-byte varints, role, the texts' tags and lengths, a search hit's source,
score and run)."""
REPLY_SLACK = 64 * 1024
"""What the default max_reply_bytes keeps below a default client's 4 MiB receive limit, and what the server's
send limit keeps above max_reply_bytes: room for what a reply carries beside its messages (the summary,
tokens, counts)."""
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024 - REPLY_SLACK


def cost(record: Record, with_payload: bool = True) -> int:
    """Bytes `record` takes in a reply, counted from above."""
    size = MESSAGE_OVERHEAD + utf8_size(record.content) + utf8_size(record.sender)
    return size + utf8_size(record.payload) if with_payload else size


def without_payloads(records: Sequence[Record]) -> list[Record]:
    return [msgspec.structs.replace(record, payload="") if record.payload else record for record in records]


def surely_fits(records: Sequence[Record], budget: int) -> bool:
    """Whether `records` fit in `budget` bytes by a count that encodes no text: four bytes per code point
    bound UTF-8 from above, so a reply far within its budget, the usual one, is known to fit at the cost of
    a few len() calls. False says only that the exact count (`cost`) must decide."""
    return sum(len(record.content) + len(record.sender) + len(record.payload) for record in records) * 4 \
        + MESSAGE_OVERHEAD * len(records) <= budget


def newest_fitting(records: Sequence[Record], budget: int) -> int:
    """How many of the newest `records` (oldest first) fit in `budget` bytes; at least one, or
    MESSAGE_TOO_LARGE_FOR_REPLY naming the newest."""
    if surely_fits(records, budget):
        return len(records)
    used = taken = 0
    for record in reversed(records):
        used += cost(record)
        if used > budget:
            break
        taken += 1
    if records and not taken:
        raise too_large(records[-1], budget)
    return taken


def echoed(records: Sequence[Record], budget: int) -> tuple[list[Record], int]:
    """`records` (oldest first) each kept, the newest whole while they fit `budget` and the older ones as an
    acknowledgement (id, role, sender, time), so the echo fits whatever was deleted; and how many lost their
    texts."""
    whole = 0
    used = sum(cost(_acknowledgement(record)) for record in records)
    for record in reversed(records):
        used += utf8_size(record.content) + utf8_size(record.payload)
        if used > budget:
            break
        whole += 1
    cut = len(records) - whole
    return [_acknowledgement(record) for record in records[:cut]] + list(records[cut:]), cut


def _acknowledgement(record: Record) -> Record:
    return msgspec.structs.replace(record, content="", payload="")


def too_large(record: Record, budget: int) -> FailedPrecondition:
    """FAILED_PRECONDITION: the message is not a state of the server a retry can change, nor a quota; the caller
    reads it another way (without payloads, or with limits raised on both ends)."""
    hint = ("read it with omit_payloads (its content fits), or raise max_reply_bytes together with the client's "
            "receive limit" if record.payload else
            "raise max_reply_bytes together with the client's receive limit")
    return FailedPrecondition(
        f"message {record.id} takes {cost(record)} bytes, more than this reply may carry ({budget} of "
        f"max_reply_bytes): {hint}",
        reason=Reason.MESSAGE_TOO_LARGE_FOR_REPLY, metadata={"message_id": str(record.id), "budget": str(budget)})
