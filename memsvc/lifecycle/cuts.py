"""Where history.json may be cut: only right after an assistant message, never between a tool call and its result.

Owns the rule for the cut of a manual Compact (keep the window) and of an
auto compaction (the smallest cut leaving the history within a size). Must
never cut anything itself: compaction.py does.
"""

from __future__ import annotations

from memsvc.core.records import Record
from memsvc.window import history

AUTO_COMPACT_RATIO = 0.8
"An oversize history is cut to this part of max_history_bytes, so the next Appends do not cut again at once."


def _cuts_at(records: list[Record], cut: int) -> bool:
    """Right after an assistant message, and not between a tool call and its result."""
    return records[cut - 1].role == "assistant" and (cut == len(records) or records[cut].role != "tool")


def pair_boundary(records: list[Record], at_most: int) -> int:
    """The largest cut <= at_most that falls right after an assistant message (0 if none)."""
    for cut in range(min(at_most, len(records)), 0, -1):
        if _cuts_at(records, cut):
            return cut
    return 0


def cut_for_size(records: list[Record], target_bytes: int) -> int:
    """The smallest pair-boundary cut leaving the rendered history at most `target_bytes`."""
    sizes = [len(history.encode_line([record], first=False)) for record in records]
    remaining = len(history.EMPTY) + sum(sizes)
    needed = 0
    while needed < len(records) and remaining > target_bytes:
        remaining -= sizes[needed]
        needed += 1
    if needed == 0:
        return 0
    for cut in range(needed, len(records)):
        if cut and _cuts_at(records, cut):
            return cut
    return 0
