"""Expansion of semantic hits into runs: 2 before, 1 after, clamped, merged, in order."""

from __future__ import annotations

from memsvc.core.records import Record
from memsvc.search.semantic import expand


def records(count: int, start: int = 1) -> list[Record]:
    return [Record(id=n, role="user", content=f"m{n}", send_at=n) for n in range(start, start + count)]


def shape(hits) -> list[tuple[int, bool, int]]:
    return [(hit.record.id, hit.is_context, hit.run) for hit in hits]


def test_each_hit_gets_exactly_two_before_and_one_after():
    hits = expand(records(20), {10: 0.9})
    assert shape(hits) == [(8, True, 1), (9, True, 1), (10, False, 1), (11, True, 1)]
    assert [hit.score for hit in hits] == [0.0, 0.0, 0.9, 0.0]
    assert {hit.source for hit in hits} == {"recent"}


def test_expansion_is_clamped_at_both_ends():
    assert shape(expand(records(10), {1: 0.5})) == [(1, False, 1), (2, True, 1)]
    assert shape(expand(records(10), {2: 0.5})) == [(1, True, 1), (2, False, 1), (3, True, 1)]
    assert shape(expand(records(10), {10: 0.5})) == [(8, True, 1), (9, True, 1), (10, False, 1)]


def test_overlapping_and_touching_expansions_merge_into_one_run_in_time_order():
    hits = expand(records(30), {12: 0.4, 10: 0.9, 20: 0.7, 16: 0.1})
    assert shape(hits) == [(8, True, 1), (9, True, 1), (10, False, 1), (11, True, 1), (12, False, 1),
                           (13, True, 1), (14, True, 1), (15, True, 1), (16, False, 1), (17, True, 1),
                           (18, True, 1), (19, True, 1), (20, False, 1), (21, True, 1)]
    assert [hit.record.id for hit in hits] == sorted(hit.record.id for hit in hits)


def test_separate_hits_are_separate_runs_and_ids_no_longer_held_are_skipped():
    hits = expand(records(40, start=101), {105: 0.3, 130: 0.2, 7: 0.9, 999: 0.8})
    assert shape(hits) == [(103, True, 1), (104, True, 1), (105, False, 1), (106, True, 1),
                           (128, True, 2), (129, True, 2), (130, False, 2), (131, True, 2)]
    assert expand([], {1: 0.5}) == []
