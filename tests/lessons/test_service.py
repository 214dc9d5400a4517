"""Error memory's behaviour, against both backends (a real SQLite file in tmp_path and a real
PostgreSQL database), with a clock the test moves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from memsvc.app import App
from memsvc.core import config
from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.lessons.service import Lessons
from memsvc.lessons.validation import MAX_TEXT_BYTES, NewLesson
from memsvc.runtime.jobs import Scheduler
from memsvc.vectors.embedders.base import Embedder, EmbeddingFailed, unit_length
from tests.support.lessons import DAY, T0, Clock, resolved


@pytest.fixture
def opened(lessons_backend, clock: Clock):
    """Open error memory over the test's backend (again and again: each sees the same lessons)."""
    stores: list[Lessons] = []

    def open_lessons(ttl_days: float = 90, embedder: Embedder | None = None) -> Lessons:
        stores.append(Lessons(lessons_backend.store(clock), ttl_days=ttl_days, clock=clock, embedder=embedder))
        return stores[-1]

    yield open_lessons
    for store in stores:
        store.close()


@pytest.fixture
def lessons(opened) -> Lessons:
    return opened()


def test_a_resolved_lesson_is_stored_with_its_ttl_and_error_type(lessons: Lessons, clock: Clock):
    result = lessons.record(resolved(keywords=["cloudflare", " 403 ", "CloudFlare", ""], session_id="s1"))
    lesson = result.lesson
    assert result.stored and not result.refreshed
    assert lesson.keywords == ["cloudflare", "403", "error_type:permission"]
    assert (lesson.created_at, lesson.last_hit, lesson.expires_at, lesson.hit_count) == (T0, T0, T0 + 90 * DAY, 0)
    assert lesson.session_id == "s1"
    assert lessons.list_page()[0] == [lesson]


@pytest.mark.parametrize("outcome", ["failed", "abandoned"])
def test_failed_and_abandoned_are_discarded_and_say_so(lessons: Lessons, outcome: str):
    result = lessons.record(NewLesson(tool_name="t", symptom="boom", outcome=outcome))
    assert (result.stored, result.lesson) == (False, None)
    assert outcome in result.detail and "only resolved" in result.detail
    assert lessons.list_page() == ([], "")


def test_a_repeated_lesson_refreshes_the_first_and_takes_the_newer_action(lessons: Lessons, clock: Clock):
    first = lessons.record(resolved(keywords=["403"])).lesson
    clock.advance(10)
    again = lessons.record(resolved(symptom="  http 403   FORBIDDEN from Cloudflare. ", keywords=["waf"],
                                    action="use the API endpoint instead", cause="bot protection"))
    assert again.refreshed and again.stored
    lesson = again.lesson
    assert lesson.id == first.id and lesson.created_at == T0 and lesson.symptom == first.symptom
    assert (lesson.hit_count, lesson.last_hit, lesson.expires_at) == (1, clock.now, clock.now + 90 * DAY)
    assert (lesson.action, lesson.cause) == ("use the API endpoint instead", "bot protection")
    assert lesson.keywords == ["403", "waf", "error_type:permission"]
    assert len(lessons.list_page()[0]) == 1
    other_tool = lessons.record(resolved(tool="browser")).lesson
    assert other_tool.id != first.id and len(lessons.list_page()[0]) == 2


def test_request_ids_and_timestamps_do_not_defeat_dedup(lessons: Lessons):
    first = lessons.record(resolved(tool="db", symptom="deadlock in txn 9f8e7d6c5b4a at 2026-01-02T03:04:05Z")).lesson
    again = lessons.record(resolved(tool="db", symptom="Deadlock in txn 0a1b2c3d4e5f at 2026-02-03 10:11:12"))
    assert again.refreshed and again.lesson.id == first.id
    distinct = lessons.record(resolved(tool="db", symptom="deadlock in txn 9f8e7d6c5b4a at 2026-01-02T03:04:05Z!!x"))
    assert not distinct.refreshed


def test_lookup_finds_related_lessons_of_that_tool_best_first_and_refreshes_them(lessons: Lessons, clock: Clock):
    exact = lessons.record(resolved(symptom="HTTP 403 Forbidden", keywords=["403"])).lesson
    keyword = lessons.record(resolved(symptom="blocked by the WAF", keywords=["cloudflare"])).lesson
    unrelated = lessons.record(resolved(symptom="DNS lookup of the host failed", keywords=["dns"])).lesson
    lessons.record(resolved(tool="other_tool", symptom="HTTP 403 Forbidden"))
    clock.advance(30)
    related = lessons.lookup("web_fetch", "GET https://x.test: HTTP 403 Forbidden (cloudflare ray 8a1f)")
    assert [lesson.id for lesson in related.lessons] == [exact.id, keyword.id]
    for lesson in related.lessons:
        assert (lesson.last_hit, lesson.expires_at, lesson.hit_count) == (clock.now, clock.now + 90 * DAY, 1)
    stored = {lesson.id: lesson for lesson in lessons.list_page()[0]}
    assert stored[exact.id].expires_at == clock.now + 90 * DAY
    assert stored[unrelated.id].expires_at == T0 + 90 * DAY and stored[unrelated.id].hit_count == 0
    assert related.related_errors.startswith("related_errors: 2 earlier lesson(s) for tool web_fetch")
    assert "1. [permission] symptom: HTTP 403 Forbidden" in related.related_errors
    assert "fix: send a browser User-Agent header" in related.related_errors


def test_lookup_limit_defaults_to_three_and_nothing_related_gives_no_text(lessons: Lessons):
    for number in range(5):
        lessons.record(resolved(symptom=f"quota exceeded for project p{number}", keywords=["quota"]))
    assert len(lessons.lookup("web_fetch", "quota exceeded").lessons) == 3
    assert len(lessons.lookup("web_fetch", "quota exceeded", limit=4).lessons) == 4
    nothing = lessons.lookup("web_fetch", "the moon is made of cheese")
    assert (nothing.lessons, nothing.related_errors) == ([], "")
    assert lessons.lookup("no_such_tool", "quota exceeded").lessons == []


def test_lookup_matches_chinese_and_japanese_text_by_character_pairs(lessons: Lessons):
    chinese = lessons.record(resolved(tool="shell", symptom="沙盒裡找不到設定檔", action="先建立設定檔")).lesson
    japanese = lessons.record(resolved(tool="shell", symptom="設定ファイルが読み込めません", action="パスを確認")).lesson
    assert [x.id for x in lessons.lookup("shell", "錯誤：沙盒裡找不到設定檔 config.toml").lessons] == [chinese.id]
    assert [x.id for x in lessons.lookup("shell", "設定ファイルが読み込めませんでした").lessons] == [japanese.id]


def test_lessons_expire_ttl_after_their_last_hit_and_a_hit_keeps_them(lessons: Lessons, clock: Clock):
    kept = lessons.record(resolved(symptom="connection timed out", keywords=["timeout"])).lesson
    dropped = lessons.record(resolved(symptom="disk quota exceeded", keywords=["quota"])).lesson
    clock.advance(60)
    assert [x.id for x in lessons.lookup("web_fetch", "connection timed out again").lessons] == [kept.id]
    clock.advance(31)  # 91 days after recording, 31 after kept's hit
    assert [x.id for x in lessons.list_page()[0]] == [kept.id]
    assert lessons.lookup("web_fetch", "disk quota exceeded").lessons == []
    assert lessons.search("quota") == []
    with pytest.raises(NotFound) as expired:
        lessons.update_action(dropped.id, "x")
    assert expired.value.reason == "ERROR_RECORD_NOT_FOUND"
    assert lessons.purge_expired() == 1
    clock.advance(60)
    assert lessons.list_page()[0] == [] and lessons.purge_expired() == 1


def test_recording_over_an_expired_lesson_starts_a_new_one(lessons: Lessons, clock: Clock):
    old = lessons.record(resolved()).lesson
    clock.advance(91)
    new = lessons.record(resolved())
    assert not new.refreshed and new.lesson.id != old.id and new.lesson.hit_count == 0


def test_update_rewrites_the_action_and_keeps_the_ttl(lessons: Lessons, clock: Clock):
    lesson = lessons.record(resolved()).lesson
    clock.advance(5)
    updated = lessons.update_action(lesson.id, "  use the official API  ")
    assert updated.action == "use the official API"
    assert (updated.last_hit, updated.expires_at, updated.hit_count) == (T0, T0 + 90 * DAY, 0)
    assert lessons.list_page()[0] == [updated]


def test_delete_returns_the_lesson_and_unknown_ids_are_not_found(lessons: Lessons):
    lesson = lessons.record(resolved()).lesson
    assert lessons.delete(lesson.id) == lesson
    for call in (lambda: lessons.delete(lesson.id), lambda: lessons.update_action(lesson.id, "x"),
                 lambda: lessons.delete("no\x00such"), lambda: lessons.update_action("\x00", "x")):
        with pytest.raises(NotFound) as caught:
            call()
        assert caught.value.reason == "ERROR_RECORD_NOT_FOUND"
    assert lessons.list_page()[0] == []


def test_search_spans_tools_and_ranks_keyword_and_tool_matches_first(lessons: Lessons, clock: Clock):
    in_action = lessons.record(resolved(tool="a", symptom="x failed", action="raise the timeout")).lesson
    clock.advance(1)
    in_symptom = lessons.record(resolved(tool="b", symptom="Timeout talking to b")).lesson
    clock.advance(1)
    in_keyword = lessons.record(resolved(tool="c", symptom="slow", keywords=["TIMEOUT"])).lesson
    lessons.record(resolved(tool="d", symptom="unrelated"))
    # in_symptom also carries the automatic keyword error_type:timeout: keyword + symptom beat keyword alone
    assert [x.id for x in lessons.search("timeout")] == [in_symptom.id, in_keyword.id, in_action.id]
    assert len(lessons.search("timeout", limit=2)) == 2
    assert [x.id for x in lessons.search("error_type:timeout")] == [in_symptom.id]


def test_search_folds_case_and_width_beyond_ascii_and_sees_updated_actions(lessons: Lessons):
    german = lessons.record(resolved(tool="form", symptom="Feld Größe ungültig")).lesson
    assert [x.id for x in lessons.search("GRÖSSE")] == [german.id]
    assert [x.id for x in lessons.search("ＵＮＧÜＬＴＩＧ")] == [german.id]
    assert lessons.search("metric units") == []
    lessons.update_action(german.id, "send the size in metric units")
    assert [x.id for x in lessons.search("Metric Units")] == [german.id]
    assert lessons.search("user-agent") == []


def test_list_pages_newest_first_filters_by_tool_and_rejects_foreign_tokens(lessons: Lessons, clock: Clock):
    ids = []
    for number in range(7):
        ids.append(lessons.record(resolved(tool="even" if number % 2 == 0 else "odd",
                                           symptom=f"symptom {number}")).lesson.id)
        clock.advance(0.001)
    seen, token = [], ""
    while True:
        page, token = lessons.list_page(3, token)
        seen += [x.id for x in page]
        if not token:
            break
    assert seen == ids[::-1]
    assert [x.id for x in lessons.list_page(tool_name="odd")[0]] == [ids[5], ids[3], ids[1]]
    for bad in ("garbage!", "MTIz", "bm90LWEtdG9rZW4"):
        with pytest.raises(InvalidArgument) as caught:
            lessons.list_page(3, bad)
        assert caught.value.reason == "INVALID_PAGE_TOKEN"


@pytest.mark.parametrize("fields, reason", [
    ({"tool_name": ""}, "TOOL_NAME_REQUIRED"),
    ({"tool_name": "   "}, "TOOL_NAME_REQUIRED"),
    ({"tool_name": "a\nb"}, "INVALID_TOOL_NAME"),
    ({"tool_name": "x" * 129}, "INVALID_TOOL_NAME"),
    ({"symptom": ""}, "SYMPTOM_REQUIRED"),
    ({"action": " "}, "ACTION_REQUIRED"),
    ({"outcome": ""}, "OUTCOME_REQUIRED"),
    ({"outcome": "maybe"}, "INVALID_OUTCOME"),
    ({"symptom": "x" * (MAX_TEXT_BYTES + 1)}, "FIELD_TOO_LARGE"),
    ({"cause": "é" * (MAX_TEXT_BYTES // 2 + 1)}, "FIELD_TOO_LARGE"),
    ({"keywords": ["k"] * 33}, "TOO_MANY_KEYWORDS"),
    ({"keywords": ["k" * 129]}, "KEYWORD_TOO_LONG"),
    ({"session_id": ".."}, "INVALID_SESSION_ID"),
])
def test_bad_records_are_rejected_and_store_nothing(lessons: Lessons, fields: dict, reason: str):
    base = {"tool_name": "t", "symptom": "boom", "action": "fix", "outcome": "resolved"}
    with pytest.raises(InvalidArgument) as caught:
        lessons.record(NewLesson(**{**base, **fields}))
    assert caught.value.reason == reason
    assert lessons.list_page() == ([], "")


def test_a_failed_outcome_needs_no_action_but_still_needs_a_tool_and_symptom(lessons: Lessons):
    assert not lessons.record(NewLesson(tool_name="t", symptom="boom", outcome="failed")).stored
    with pytest.raises(InvalidArgument) as refused:
        lessons.record(NewLesson(tool_name="t", symptom="", outcome="abandoned"))
    assert refused.value.reason == "SYMPTOM_REQUIRED"


@pytest.mark.parametrize("call, reason", [
    (lambda s: s.lookup("", "x"), "TOOL_NAME_REQUIRED"),
    (lambda s: s.lookup("t", "x" * (64 * 1024 + 1)), "FIELD_TOO_LARGE"),
    (lambda s: s.search("  "), "EMPTY_QUERY"),
    (lambda s: s.search("q" * 1025), "QUERY_TOO_LONG"),
    (lambda s: s.update_action("", "x"), "ERROR_ID_REQUIRED"),
    (lambda s: s.update_action("f" * 65, "x"), "INVALID_ERROR_ID"),
    (lambda s: s.delete(""), "ERROR_ID_REQUIRED"),
])
def test_bad_queries_get_stable_reasons(lessons: Lessons, call, reason: str):
    with pytest.raises(InvalidArgument) as caught:
        call(lessons)
    assert caught.value.reason == reason


def test_an_update_with_a_blank_action_changes_nothing(lessons: Lessons):
    lesson = lessons.record(resolved()).lesson
    with pytest.raises(InvalidArgument) as refused:
        lessons.update_action(lesson.id, "  ")
    assert refused.value.reason == "ACTION_REQUIRED"
    assert lessons.list_page()[0] == [lesson]


def test_nul_characters_and_the_largest_symptom_are_kept_exactly(lessons: Lessons):
    # PostgreSQL's text columns cannot hold NUL, and its indexes cannot hold 16 KiB keys
    odd = lessons.record(resolved(symptom="bad byte \x00 in\x00put", cause="a \x00", action="strip \x00",
                                  keywords=["nul\x00"])).lesson
    largest = lessons.record(resolved(symptom="é" * (MAX_TEXT_BYTES // 2), action="x" * MAX_TEXT_BYTES)).lesson
    assert {x.id: x for x in lessons.list_page()[0]} == {odd.id: odd, largest.id: largest}
    assert [x.id for x in lessons.search("in\x00put")] == [odd.id]
    assert lessons.record(resolved(symptom="BAD byte \x00 in\x00put")).lesson.id == odd.id
    assert lessons.record(resolved(symptom="É" * (MAX_TEXT_BYTES // 2))).lesson.id == largest.id


def test_lessons_survive_reopening(opened):
    first = opened()
    lesson = first.record(resolved()).lesson
    first.close()
    assert opened().list_page()[0] == [lesson]


def test_opening_purges_lessons_that_expired_while_closed(opened, lessons_backend, clock: Clock):
    opened(ttl_days=1).record(resolved())
    clock.advance(2)
    assert lessons_backend.column("count(*)") == [1]
    opened(ttl_days=1)
    assert lessons_backend.column("count(*)") == [0]


class WordVectors(Embedder):
    """A stand-in embedding provider: one dimension per concept, synonyms share it."""

    CONCEPTS = (("quota", "limit", "exceeded", "too many"), ("login", "credential", "password", "sign in"))
    name = "words-v1"

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    @property
    def dimension(self) -> int:
        return len(self.CONCEPTS)

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
        self.calls += 1
        if self.fail:
            raise EmbeddingFailed("provider down")
        return unit_length(np.asarray([[float(sum(word in text.lower() for word in concept)) + 1e-3
                                        for concept in self.CONCEPTS] for text in texts]))


def test_vector_similarity_relates_lessons_with_no_shared_words(opened):
    embedder = WordVectors()
    store = opened(embedder=embedder)
    quota = store.record(resolved(tool="api", symptom="quota exceeded")).lesson
    store.record(resolved(tool="api", symptom="password rejected"))
    assert [x.id for x in store.lookup("api", "too many requests: rate limit").lessons] == [quota.id]
    embedder.fail = True  # keyword relevance still answers while the provider is down
    assert [x.id for x in store.lookup("api", "quota exceeded").lessons] == [quota.id]


def test_lessons_stored_without_vectors_are_embedded_at_lookup(opened, lessons_backend):
    quota = opened().record(resolved(tool="api", symptom="quota exceeded")).lesson
    assert lessons_backend.column("vector") == [None]
    embedder = WordVectors()
    store = opened(embedder=embedder)
    assert [x.id for x in store.lookup("api", "too many requests").lessons] == [quota.id]
    assert lessons_backend.column("vector_model") == ["words-v1"]
    calls = embedder.calls
    store.lookup("api", "too many requests")
    assert embedder.calls == calls + 1  # only the query: the lesson's vector was kept


def test_the_purge_job_deletes_expired_lessons_on_its_schedule(lessons: Lessons, lessons_backend, clock: Clock):
    lessons.record(resolved())
    wall = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    scheduler = Scheduler(clock=lambda: wall)
    scheduler.register("lesson-purge", "17 * * * *", lessons.purge_expired)
    clock.advance(91)
    wall = wall.replace(minute=17)
    for thread in scheduler.tick():
        thread.join()
    assert lessons_backend.column("count(*)") == [0]


def test_the_server_builds_the_backend_and_registers_the_purge_job_with_its_setting(lessons_backend, data_dir):
    settings = config.load({"data_dir": str(data_dir), "error_purge_schedule": "5 4 * * *", "embedder": "builtin",
                            **lessons_backend.settings}, environ={})
    app = App(settings)
    try:
        (job,) = [job for job in app.jobs.jobs if job.name == "lesson-purge"]
        assert job.schedule == "5 4 * * *" and job.action == app.tenant().lessons.purge_expired
        app.tenant().lessons.record(resolved())
    finally:
        app.close()
    assert lessons_backend.column("count(*)") == [1]
