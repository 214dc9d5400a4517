"""What a query means: its limit, its length and its time window, checked before any tier is searched."""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.units import NANOS_PER_DAY, NO_UPPER_BOUND
from memsvc.search.query import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, Bounds, Query, bounds

NOW = 1_000 * NANOS_PER_DAY


def test_the_defaults_search_everything_with_the_default_limit():
    assert bounds(Query(session_id="s", text="q"), NOW) == Bounds(DEFAULT_LIMIT, 0, NO_UPPER_BOUND)


@pytest.mark.parametrize("time_range, days", [("1d", 1), ("7d", 7), ("1m", 30), ("1y", 365)])
def test_named_ranges_reach_back_from_now(time_range, days):
    expected = Bounds(DEFAULT_LIMIT, NOW - days * NANOS_PER_DAY, NO_UPPER_BOUND)
    assert bounds(Query(session_id="s", time_range=time_range), NOW) == expected


def test_explicit_times_win_over_a_named_range_and_are_half_open():
    limits = bounds(Query(session_id="s", time_range="1d", since=10, until=20, limit=3), NOW)
    assert limits == Bounds(3, 10, 20)
    assert limits.contains(10) and limits.contains(19) and not limits.contains(20) and not limits.contains(9)
    assert bounds(Query(session_id="s", since=10), NOW).until == NO_UPPER_BOUND


@pytest.mark.parametrize("query, reason", [
    (Query(session_id="s", limit=MAX_LIMIT + 1), "INVALID_LIMIT"),
    (Query(session_id="s", limit=-1), "INVALID_LIMIT"),
    (Query(session_id="s", text="x" * (MAX_QUERY_CHARS + 1)), "QUERY_TOO_LONG"),
    (Query(session_id="s", since=-1), "INVALID_TIME_RANGE"),
    (Query(session_id="s", since=20, until=20), "INVALID_TIME_RANGE"),
    (Query(session_id="s", time_range="2w"), "INVALID_TIME_RANGE"),
    (Query(session_id=".."), "INVALID_SESSION_ID"),
])
def test_bad_queries_are_refused_with_their_reason(query, reason):
    with pytest.raises(InvalidArgument) as refused:
        bounds(query, NOW)
    assert refused.value.reason == reason
