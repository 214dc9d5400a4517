"""Expanding hits into runs of conversation: each hit with the 2 messages
before it and the 1 after (those present, by id), overlapping or touching
expansions merged, in time order, each contiguous run numbered from 1.

The records given may be sparse (the archive's neighbourhoods of its hits,
then the recent messages): a neighbour is a record whose id is within 2
before or 1 after the hit's, and runs merge only across consecutive ids.
Messages below `archived_below` are marked as coming from the archive. Must
never search: callers bring the hits and the records around them.
"""

from __future__ import annotations

import bisect

from memsvc.core.records import Record
from memsvc.search.query import Hit

BEFORE, AFTER = 2, 1


def expand(records: list[Record], scores: dict[int, float], archived_below: int = 0) -> list[Hit]:
    """Every hit among `records` (sorted by id) with its neighbours, in runs; `scores` maps hit id to score."""
    spans: list[list[int]] = []
    present = sorted(at for at, id_ in ((_position(records, id_), id_) for id_ in scores)
                     if at < len(records) and records[at].id == id_)
    for position in present:
        hit_id = records[position].id
        start = _position(records, hit_id - BEFORE)
        end = bisect.bisect_right(records, hit_id + AFTER, key=lambda record: record.id) - 1
        if spans and start <= spans[-1][1] + 1 and records[start].id <= records[spans[-1][1]].id + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    hits = []
    for run, (start, end) in enumerate(spans, start=1):
        for record in records[start:end + 1]:
            matched = record.id in scores
            hits.append(Hit(record, "archive" if record.id < archived_below else "recent",
                            score=scores[record.id] if matched else 0.0, is_context=not matched, run=run))
    return hits


def _position(records: list[Record], id_: int) -> int:
    return bisect.bisect_left(records, id_, key=lambda record: record.id)
