"""Where a keyword search runs: on the event loop only when its work is bounded before it starts
(the session open, its recent terms indexed, few tokens and postings), on the search pool otherwise.
Real sessions, a real Tantivy archive in a temp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memsvc.app import App
from memsvc.core import config
from memsvc.search.keyword import LOOP_BUDGET, KeywordSearch, LoopBudget
from memsvc.search.query import Query, bounds
from memsvc.window.incoming import NewMessage


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    built = App(config.load({"data_dir": str(tmp_path / "data"), "archive_commit_seconds": "0.01",
                             "embedder": "builtin"}, environ={}))
    try:
        yield built
    finally:
        built.close()


def keyword(text: str, **fields: object) -> Query:
    return Query(session_id="s", text=text, match="keyword", **fields)  # type: ignore[arg-type]


def searched(app: App, budget: LoopBudget = LOOP_BUDGET) -> KeywordSearch:
    """A KeywordSearch over the app's stores that has searched session s once (its recent terms indexed)."""
    search = KeywordSearch(app.tenant().store, app.tenant().archive, budget)
    search.search(keyword("anything"), bounds(keyword("anything"), 0))
    return search


def append(app: App, *contents: str) -> None:
    app.tenant().appender.append("s", [NewMessage(role="user", content=content) for content in contents])


def test_a_short_search_of_an_indexed_open_session_runs_on_the_loop(app: App):
    append(app, "we deploy the sandbox on Friday", "the heron flew")
    search = KeywordSearch(app.tenant().store, app.tenant().archive)
    assert search.placement(keyword("sandbox")) == "pool"  # its recent terms are not indexed yet
    search.search(keyword("sandbox"), bounds(keyword("sandbox"), 0))
    assert search.placement(keyword("sandbox deploy")) == "loop"
    append(app, *[f"note {number}" for number in range(3)])
    assert search.placement(keyword("sandbox")) == "loop"  # a few new messages are indexed on the loop


def test_work_that_is_not_bounded_in_advance_goes_to_the_pool(app: App):
    append(app, *[f"the sandbox build {number}" for number in range(30)])
    search = searched(app, LoopBudget(recent_postings=20, unindexed=4))
    assert search.placement(keyword("heron")) == "loop"
    assert search.placement(keyword("sandbox")) == "pool"  # 30 recent postings over a budget of 20
    assert search.placement(keyword("heron", with_context=True)) == "pool"  # context reads the archive
    assert search.placement(keyword(" ".join(f"word{number}" for number in range(9)))) == "pool"
    assert search.placement(keyword("heron " * 200)) == "pool"  # longer than text_chars
    assert search.placement(keyword("the of and")) == "pool"  # only stop words: the search says why
    append(app, *[f"more {number}" for number in range(5)])
    assert search.placement(keyword("heron")) == "pool"  # 5 messages to index, over a budget of 4


def test_a_session_not_open_goes_to_the_pool(app: App):
    append(app, "we deploy the sandbox on Friday")
    search = searched(app)
    assert search.placement(Query(session_id="never-written", text="sandbox", match="keyword")) == "pool"


def test_archived_postings_over_the_budget_go_to_the_pool(app: App):
    append(app, *[f"the release train {number}" for number in range(12)])
    app.tenant().archive.flush()
    search = searched(app, LoopBudget(archive_postings=10, recent_postings=1_000))
    assert search.placement(keyword("heron")) == "loop"
    assert search.placement(keyword("release")) == "pool"  # 12 archived postings over a budget of 10
