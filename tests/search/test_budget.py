"""A search reply within max_reply_bytes: whole runs ranked by their best match, the rest left out and counted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


TEXTS = st.text(alphabet=st.sampled_from("ab é中🙂"), max_size=40)
RUN_SIZES = st.lists(st.integers(1, 4), min_size=1, max_size=5)


@given(RUN_SIZES, st.data())
def test_every_hit_is_kept_exactly_when_their_utf8_bytes_fit(run_sizes, data):
    # Runs numbered from 1 in time order as expansion numbers them, each led by a match; budgets on and beside
    # the exact total and anywhere up to past four times it: both sides of the shortcut that encodes no text.
    hits = [Hit(Record(id=len(run_sizes) * 10 + place, content=data.draw(TEXTS), payload=data.draw(TEXTS)),
                "recent", score=0.0 if place else 0.5 + run / 100, is_context=bool(place), run=run)
            for run, size in enumerate(run_sizes, start=1) for place in range(size)]
    total = sum(replies.MESSAGE_OVERHEAD + len(h.record.content.encode()) + len(h.record.payload.encode())
                for h in hits)
    budget = data.draw(st.one_of(st.integers(total - 2, total + 2), st.integers(total, 5 * total)))
    try:
        kept = within(Results(hits, unsearched=1), budget, omit_payloads=False)
    except FailedPrecondition:  # not even the best match fits alone
        assert total > budget
        return
    assert (kept.hits == hits and kept.omitted == 0) == (total <= budget)
    assert kept.unsearched == 1 and len(kept.hits) + kept.omitted == len(hits)


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
