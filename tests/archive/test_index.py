from pathlib import Path

import pytest

from memsvc.archive import keywords
from memsvc.archive.index import TIME_FILTER_IN_MEMORY, Archive
from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record


@pytest.fixture
def archive(tmp_path: Path):
    store = Archive(tmp_path / ".store", commit_interval=0.01)
    yield store
    store.close()


def record(index: int, text: str, send_at: int | None = None) -> Record:
    return Record(id=index, role="user" if index % 2 else "assistant", content=text,
                  send_at=index if send_at is None else send_at, sender="ann" if index == 1 else "")


def parsed(archive: Archive, query: str) -> tuple[keywords.KeywordQuery, keywords.Statistics]:
    terms = keywords.parse(query)
    return terms, archive.statistics(terms)


def found(archive: Archive, session: str, query: str, below: int = 10**9, since: int = 0, until: int = 2**63 - 1):
    return [r.id for r, _ in archive.search(session, *parsed(archive, query), below, since, until, 32)]


def test_appended_messages_become_searchable_after_flush(archive):
    archive.appended("s", [record(1, "the sandbox is ready"), record(2, "great")])
    archive.flush()
    assert found(archive, "s", "sandbox") == [1]
    hit, score = archive.search("s", *parsed(archive, "sandbox"), 10, 0, 2**63 - 1, 5)[0]
    assert hit == record(1, "the sandbox is ready") and score > 0
    assert found(archive, "other", "sandbox") == []


def test_below_id_and_time_bounds(archive):
    archive.appended("s", [record(i, f"sandbox {i}", send_at=i * 100) for i in range(1, 6)])
    archive.flush()
    assert sorted(found(archive, "s", "sandbox", below=4)) == [1, 2, 3]
    assert sorted(found(archive, "s", "sandbox", since=200, until=400)) == [2, 3]
    assert found(archive, "s", "sandbox", below=1) == []


@pytest.mark.parametrize("matching", [TIME_FILTER_IN_MEMORY // 2, TIME_FILTER_IN_MEMORY + 40])
def test_a_time_range_keeps_the_best_matches_inside_it(archive, matching: int):
    """Few matches are filtered on their send_at column, many by a range query: the same answer."""
    # More occurrences rank higher: message n holds "sandbox" n % 5 + 1 times.
    archive.appended("s", [record(n, " ".join(["sandbox"] * (n % 5 + 1)) + f" note {n}", send_at=n * 10)
                           for n in range(1, matching + 1)] + [record(matching + 1, "other", send_at=15)])
    archive.flush()
    since, until = 100, 10 * (matching // 2)
    inside = [n for n in range(1, matching + 1) if since <= n * 10 < until]
    best = sorted(inside, key=lambda n: -(n % 5))[:32]
    hits = found(archive, "s", "sandbox", since=since, until=until)
    assert len(hits) == 32 and set(hits) <= set(inside), "only messages in the range"
    assert sorted(n % 5 for n in hits) == sorted(n % 5 for n in best), "the best of them (ties in any order)"


def test_reconcile_adds_only_what_is_missing(archive):
    archive.appended("s", [record(1, "one"), record(2, "two")])
    archive.flush()
    archive.recover("s", [record(1, "one"), record(2, "two"), record(3, "three"), record(4, "four")])
    archive.recover("s", [record(1, "one"), record(2, "two"), record(3, "three"), record(4, "four")])
    archive.flush()
    assert archive.count("s") == 4
    assert found(archive, "s", "three") == [3]


def test_reconcile_sees_adds_of_the_same_batch(tmp_path: Path):
    archive = Archive(tmp_path / ".store", commit_interval=60)  # one batch for everything below
    try:
        archive.appended("s", [record(1, "one")])
        archive.recover("s", [record(1, "one"), record(2, "two")])
        archive.flush()
        assert archive.count("s") == 2
    finally:
        archive.close()


def test_cleared_counts_and_deletes_only_that_session(archive):
    archive.appended("s", [record(1, "sandbox"), record(2, "sandbox")])
    archive.appended("t", [record(1, "sandbox")])
    archive.compacted("s", 2, 123)
    assert archive.cleared("s") == 2
    assert archive.count("s") == 0 and archive.count("t") == 1
    assert archive.start_at("s") == 0


def test_start_at_survives_reopen(tmp_path: Path):
    first = Archive(tmp_path / ".store")
    first.appended("s", [record(1, "kept forever")])
    first.compacted("s", 2, 777)
    first.close()
    second = Archive(tmp_path / ".store")
    try:
        assert second.start_at("s") == 777
        assert found(second, "s", "forever") == [1]
    finally:
        second.close()


def test_messages_between_ids_oldest_first(archive):
    archive.appended("s", [record(i, f"m{i}") for i in range(1, 8)])
    archive.flush()
    assert [r.id for r in archive.messages("s", 2, 6)] == [3, 4, 5]
    assert archive.messages("s", 5, 6) == [] and archive.messages("t", 0, 9) == []


def test_messages_limited_from_either_end_and_by_ids_keep_their_payloads(archive):
    archive.appended("s", [Record(id=i, role="tool", content=f"m{i}", send_at=i,
                                  payload=f'{{"n": {i}}}' if i % 2 else "") for i in range(1, 8)])
    archive.flush()
    assert [r.id for r in archive.messages("s", 1, 7, limit=2)] == [2, 3]
    assert [r.id for r in archive.messages("s", 1, 7, limit=2, newest_first=True)] == [5, 6], "still oldest first"
    assert [(r.id, r.payload) for r in archive.stored("s", [7, 4, 99])] == [(4, ""), (7, '{"n": 7}')]
    assert archive.stored("t", [1]) == [] and archive.stored("s", []) == []


def test_deleted_counts_committed_and_same_batch_messages_and_only_that_session(tmp_path: Path):
    archive = Archive(tmp_path / ".store", commit_interval=60)  # the adds below and a delete share one batch
    try:
        archive.appended("s", [record(1, "sandbox one"), record(2, "sandbox two")])
        archive.appended("t", [record(1, "sandbox one")])
        archive.flush()
        archive.appended("s", [record(3, "sandbox three")])
        assert archive.deleted("s", [1, 3, 42]) == 2
        assert found(archive, "s", "sandbox") == [2] and found(archive, "t", "sandbox") == [1]
        assert archive.deleted("s", [1, 3]) == 0, "a repeat deletes nothing more"
        archive.recover("s", [record(2, "sandbox two")])  # a session reopened: nothing deleted comes back
        archive.flush()
        assert archive.count("s") == 1
    finally:
        archive.close()


@pytest.mark.parametrize("count", [10, 200])  # below and above the in-memory time filter
def test_time_range_is_exact_for_few_and_many_matches(archive, count):
    archive.appended("s", [record(i, "sandbox log", send_at=i * 100) for i in range(1, count + 1)])
    archive.appended("s", [record(count + 1, "unrelated", send_at=500)])
    archive.flush()
    hits = archive.search("s", *parsed(archive, "sandbox"), 10**9, 300, 800, 32)
    assert sorted(r.id for r, _ in hits) == [3, 4, 5, 6, 7]
    assert found(archive, "s", "sandboxes") and not found(archive, "s", "sand")  # by stem, not by prefix


def test_a_batch_whose_data_no_field_holds_is_set_aside_and_every_other_session_commits(archive, caplog):
    archive.appended("bad", [record(1, "stored"), Record(id=2**64, role="user", content="no u64 holds this id")])
    archive.appended("good", [record(1, "the sandbox is ready")])
    archive.flush()  # at once: the bad batch is never retried
    assert found(archive, "good", "sandbox") == [1]
    assert set(archive.set_aside()) == {"bad"} and "OverflowError" in archive.set_aside()["bad"]
    for read in (lambda: archive.count("bad"), lambda: archive.messages("bad", 0, 10),
                 lambda: found(archive, "bad", "stored"), lambda: archive.check_writable("bad")):
        with pytest.raises(FailedPrecondition) as refused:
            read()
        assert refused.value.reason == "ARCHIVE_SESSION_SET_ASIDE" and "'bad'" in refused.value.message
    archive.appended("good", [record(2, "and the release notes")])
    archive.flush()
    assert archive.count("good") == 2, "the writer goes on"
    assert len([r for r in caplog.records if "set a session's messages aside" in r.getMessage()]) == 1
    archive.cleared("bad")
    assert archive.set_aside() == {} and archive.count("bad") == 0, "a Reset or removal clears it"
