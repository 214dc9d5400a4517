"""A reply's byte budget counts what its messages take in UTF-8: the shortcut for a reply far inside its budget
and the exact count agree on every text, ASCII, accented, CJK or astral, at every budget around the edge."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record
from memsvc.core.replies import MESSAGE_OVERHEAD, cost, newest_fitting

TEXTS = st.text(alphabet=st.sampled_from("ab é中🙂"), max_size=40)
RECORDS = st.lists(st.builds(Record, content=TEXTS, sender=st.sampled_from(["", "planner", "代理"]), payload=TEXTS),
                   min_size=1, max_size=8)


def exact(records: list[Record], budget: int) -> int:
    """How many of the newest records fit, each counted by encoding its texts."""
    used = taken = 0
    for record in reversed(records):
        used += MESSAGE_OVERHEAD + sum(len(text.encode()) for text in (record.content, record.sender, record.payload))
        if used > budget:
            break
        taken += 1
    return taken


@given(RECORDS, st.data())
def test_the_newest_messages_that_fit_are_counted_by_their_utf8_bytes(records, data):
    # Budgets on and beside each count where one more message stops fitting, and anywhere up to past four
    # times the whole: both sides of the shortcut's bound.
    edges = [sum(cost(record) for record in records[start:]) for start in range(len(records))]
    near_an_edge = st.tuples(st.sampled_from(edges), st.integers(-2, 2)).map(sum)
    budget = max(data.draw(st.one_of(near_an_edge, st.integers(1, 5 * edges[0]))), 1)
    expected = exact(records, budget)
    if expected == 0:
        with pytest.raises(FailedPrecondition):
            newest_fitting(records, budget)
    else:
        assert newest_fitting(records, budget) == expected


def test_cost_counts_utf8_bytes_not_characters():
    assert cost(Record(content="中" * 10, sender="é", payload="🙂")) == MESSAGE_OVERHEAD + 30 + 2 + 4
    assert cost(Record(content="中" * 10, payload="🙂"), with_payload=False) == MESSAGE_OVERHEAD + 30
