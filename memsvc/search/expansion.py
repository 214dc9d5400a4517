"""Expanding hits into runs of conversation: each hit with the 2 messages
before it and the 1 after (clamped at the ends of the list), overlapping or
touching expansions merged, in time order, each contiguous run numbered
from 1.

Must never search: callers bring the hits and the records around them.
"""

from __future__ import annotations

import bisect

from memsvc.core.records import Record
from memsvc.search.query import Hit

BEFORE, AFTER = 2, 1


def expand(records: list[Record], scores: dict[int, float]) -> list[Hit]:
    """Every hit among `records` with its neighbours, in runs; `scores` maps hit id to score."""
    spans: list[list[int]] = []
    present = (_position(records, id_) for id_ in scores)
    found = (at for at, id_ in zip(present, scores, strict=True) if at < len(records) and records[at].id == id_)
    for position in sorted(found):
        start, end = max(0, position - BEFORE), min(len(records) - 1, position + AFTER)
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    hits = []
    for run, (start, end) in enumerate(spans, start=1):
        for record in records[start:end + 1]:
            matched = record.id in scores
            hits.append(Hit(record, "recent", score=scores[record.id] if matched else 0.0, is_context=not matched,
                            run=run))
    return hits


def _position(records: list[Record], id_: int) -> int:
    return bisect.bisect_left(records, id_, key=lambda record: record.id)
