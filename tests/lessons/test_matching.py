"""Classification, dedup keys, relevance and the related_errors text."""

from __future__ import annotations

import numpy as np
import pytest

from memsvc.lessons.matching import (
    ERROR_CLASSES,
    Failure,
    classify,
    cosines,
    normalize_symptom,
    relevance,
    render_related,
    terms,
)
from memsvc.lessons.model import Lesson


@pytest.mark.parametrize("text, error_class", [
    ("Unknown tool: web_serach", "tool_not_exist"),
    ("function get_weather does not exist", "tool_not_exist"),
    ("Tool 'browser.open' is not registered", "tool_not_exist"),
    ("工具不存在: search_v2", "tool_not_exist"),
    ("missing required parameter 'url'", "required_param"),
    ("Field `path` is required", "required_param"),
    ("argument query: required but not provided", "required_param"),
    ("缺少必填參數 url", "required_param"),
    ("Permission denied: /etc/shadow", "permission"),
    ("HTTP 403 Forbidden", "permission"),
    ("401 Unauthorized: bad token", "permission"),
    ("EACCES: open '/root/x'", "permission"),
    ("沒有權限讀取此檔案", "permission"),
    ("request timed out after 30s", "timeout"),
    ("context deadline exceeded", "timeout"),
    ("Read timeout on socket", "timeout"),
    ("連線逾時", "timeout"),
    ("invalid value for parameter 'limit': -1", "invalid_param"),
    ("expected integer, got string", "invalid_param"),
    ("failed to parse JSON arguments", "invalid_param"),
    ("limit must be between 1 and 100", "invalid_param"),
    ("参数错误: date 格式错误", "invalid_param"),
    ("No results found for query", "no_result"),
    ("ENOENT: no such file or directory", "no_result"),
    ("search returned nothing", "no_result"),
    ("找不到符合的資料", "no_result"),
    ("segmentation fault (core dumped)", "other"),
    ("", "other"),
])
def test_each_class_is_recognised(text: str, error_class: str):
    assert classify(text) == error_class


def test_the_classes_are_those_of_the_spec_in_precedence_order():
    assert [name for name, _ in ERROR_CLASSES] == [
        "tool_not_exist", "required_param", "permission", "timeout", "invalid_param", "no_result"]


@pytest.mark.parametrize("text, error_class", [
    # the earlier class wins when a text fits two
    ("unknown tool 'search': no results", "tool_not_exist"),
    ("invalid request: missing parameter 'q'", "required_param"),
    ("permission denied while waiting; timed out", "permission"),
])
def test_precedence(text: str, error_class: str):
    assert classify(text) == error_class


def test_normalized_symptoms_ignore_case_width_spacing_and_volatile_ids():
    key = normalize_symptom("Deadlock in txn 9f8e7d6c5b4a (request 123e4567-e89b-12d3-a456-426614174000) "
                            "at 2026-01-02T03:04:05.123Z.")
    assert key == "deadlock in txn <id> (request <id>) at <time>"
    assert normalize_symptom("ＨＴＴＰ  403\tforbidden!") == normalize_symptom("http 403 Forbidden")
    assert normalize_symptom("HTTP 403") != normalize_symptom("HTTP 404")  # numbers that mean something stay


def test_terms_are_words_and_cjk_character_pairs():
    assert terms("The File_Path is invalid: ERROR x") == {"file_path", "invalid"}
    assert terms("沙盒裡測試") == {"沙盒", "盒裡", "裡測", "測試"}
    assert terms("timeout 超時") == {"timeout", "超時"}


def lesson(**fields) -> Lesson:
    fields.setdefault("keywords", ["error_type:other"])
    fields.setdefault("symptom", "s")
    return Lesson(id="1" * 32, tool_name="t", cause=fields.pop("cause", ""), action=fields.pop("action", "a"),
                  session_id="", created_at=1, last_hit=1, expires_at=2, hit_count=0, **fields)


def test_relevance_adds_containment_keywords_shared_words_and_class():
    contained = lesson(symptom="HTTP 403 Forbidden", keywords=["error_type:permission"])
    assert relevance(contained, Failure.of("GET /x -> HTTP 403 Forbidden")) == pytest.approx(1.0 + 1.0 + 0.25)
    by_keyword = lesson(symptom="blocked", keywords=["cloudflare", "error_type:other"])
    assert relevance(by_keyword, Failure.of("cloudflare challenge page")) == pytest.approx(0.5)
    same_class_only = lesson(symptom="deadline exceeded", keywords=["error_type:timeout"])
    assert relevance(same_class_only, Failure.of("read timed out")) == pytest.approx(0.25)
    assert relevance(lesson(symptom="disk full"), Failure.of("moon cheese")) == 0


def test_related_errors_text_numbers_lessons_and_flattens_long_fields():
    lessons = [lesson(symptom="line one\nline two", cause="because", action="do this", keywords=["error_type:timeout"]),
               lesson(symptom="x" * 2000, action="do that")]
    text = render_related("web_fetch", lessons)
    assert text.splitlines() == [
        "related_errors: 2 earlier lesson(s) for tool web_fetch, best first. Apply a fix only if it fits this failure.",
        "1. [timeout] symptom: line one line two",
        "   cause: because",
        "   fix: do this",
        "2. [other] symptom: " + "x" * 597 + "...",
        "   fix: do that",
    ]
    assert render_related("t", []) == ""


def test_cosines_compare_one_query_with_many_and_treat_empty_vectors_as_unrelated():
    query = np.array([3.0, 4.0], dtype=np.float32)
    rows = np.array([[6.0, 8.0], [-4.0, 3.0], [0.0, 0.0], [-3.0, -4.0]], dtype=np.float32)
    assert cosines(query, rows) == pytest.approx([1.0, 0.0, 0.0, -1.0])
    assert cosines(np.zeros(2, dtype=np.float32), rows) == pytest.approx([0.0] * 4)
