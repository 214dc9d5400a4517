"""A search reply within max_reply_bytes: whole runs ranked by their best match, the rest left out and counted."""

from __future__ import annotations

import pytest

from memsvc.core import replies
from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record
from memsvc.search.budget import within
from memsvc.search.query import Hit, Results


def hit(id_: int, run: int, score: float = 0.0, size: int = 1000, payload: str = "") -> Hit:
    return Hit(Record(id=id_, role="user", content="x" * size, payload=payload), "recent", score=score,
               is_context=not score, run=run)


RUNS = [hit(1, 1), hit(2, 1, 0.2), hit(3, 2, 0.9), hit(4, 2), hit(5, 3), hit(6, 3, 0.5)]
"Three runs in time order; run 2 ranks first, then run 3, then run 1."


def test_whole_runs_are_kept_best_first_and_numbered_again_in_time_order():
    two_runs = 4 * replies.cost(RUNS[0].record)
    kept = within(Results(RUNS, unsearched=3), two_runs, omit_payloads=False)
    assert [(h.record.id, h.run) for h in kept.hits] == [(3, 1), (4, 1), (5, 2), (6, 2)]
    assert kept.omitted == 2 and kept.unsearched == 3
    everything = within(Results(RUNS), 10**9, omit_payloads=False)
    assert everything.hits == RUNS and everything.omitted == 0


def test_keyword_hits_without_context_keep_their_rank_order():
    ranked = [hit(9, 0, 3.0), hit(2, 0, 2.0), hit(5, 0, 1.0)]
    kept = within(Results(ranked), 2 * replies.cost(ranked[0].record), omit_payloads=False)
    assert [h.record.id for h in kept.hits] == [9, 2] and kept.omitted == 1


def test_the_best_run_too_large_comes_as_its_best_match_and_a_match_too_large_is_named():
    alone = within(Results(RUNS), replies.cost(RUNS[0].record) + 10, omit_payloads=False)
    assert [(h.record.id, h.run) for h in alone.hits] == [(3, 1)] and alone.omitted == 5
    with pytest.raises(FailedPrecondition) as refused:
        within(Results(RUNS), 500, omit_payloads=False)
    assert refused.value.reason == "MESSAGE_TOO_LARGE_FOR_REPLY" and refused.value.metadata["message_id"] == "3"


def test_payloads_only_when_asked():
    heavy = [hit(1, 0, 1.0, size=10, payload='"' + "p" * 5000 + '"')]
    assert within(Results(heavy), 1000, omit_payloads=True).hits[0].record.payload == ""
    with pytest.raises(FailedPrecondition):
        within(Results(heavy), 1000, omit_payloads=False)
