"""Request checks for error memory: cleaning, stable reasons, limits and page tokens.
(That a rejected request stores nothing is tested through the store in test_lessons.)"""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.lessons.validation import (
    MAX_KEYWORDS,
    NewLesson,
    check_id,
    check_new,
    clamp,
    decode_token,
    encode_token,
    user_keywords,
)


def test_a_valid_lesson_comes_back_trimmed_with_clean_keywords():
    cleaned = check_new(NewLesson(tool_name="  web_fetch ", symptom=" 403 \n", outcome="resolved", action=" retry ",
                                  cause=" waf ", keywords=[" a ", "A", "", "error_type:timeout", "b"]))
    assert (cleaned.tool_name, cleaned.symptom, cleaned.action, cleaned.cause) == ("web_fetch", "403", "retry", "waf")
    assert cleaned.keywords == ["a", "b"]  # the automatic error_type keyword is the server's to set


def test_keywords_keep_their_first_spelling_and_order():
    assert user_keywords(["Cloudflare", "403", "CLOUDFLARE", " 403"]) == ["Cloudflare", "403"]
    assert len(user_keywords([f"k{n}" for n in range(MAX_KEYWORDS + 5)])) == MAX_KEYWORDS


@pytest.mark.parametrize("fields, reason", [
    ({"outcome": "resolved", "action": ""}, "ACTION_REQUIRED"),
    ({"outcome": "failed", "action": ""}, None),
    ({"outcome": "abandoned", "symptom": " "}, "SYMPTOM_REQUIRED"),
    ({"outcome": "RESOLVED"}, "INVALID_OUTCOME"),
    ({"tool_name": "tab\there"}, "INVALID_TOOL_NAME"),
    ({"tool_name": "工具_名"}, None),
])
def test_checks(fields: dict, reason: str | None):
    new = NewLesson(**{"tool_name": "t", "symptom": "s", "action": "a", "outcome": "resolved", **fields})
    if reason is None:
        check_new(new)
        return
    with pytest.raises(InvalidArgument) as caught:
        check_new(new)
    assert caught.value.reason == reason


def test_oversize_fields_name_the_field():
    with pytest.raises(InvalidArgument) as caught:
        check_new(NewLesson(tool_name="t", symptom="s", action="a" * 20_000, outcome="resolved"))
    assert (caught.value.reason, caught.value.metadata) == ("FIELD_TOO_LARGE", {"field": "action"})


def test_ids_must_be_present_and_plausible():
    check_id("0" * 32)
    for bad, reason in (("", "ERROR_ID_REQUIRED"), ("x" * 65, "INVALID_ERROR_ID")):
        with pytest.raises(InvalidArgument) as caught:
            check_id(bad)
        assert caught.value.reason == reason


def test_page_tokens_round_trip_and_foreign_ones_are_rejected():
    token = encode_token(1_800_000_000_123_456_789, "ab" * 16)
    assert decode_token(token) == (1_800_000_000_123_456_789, "ab" * 16)
    forged = encode_token(1, "not-hex")
    out_of_range = [encode_token(time, "ab" * 16) for time in (2**63, -1)]
    for bad in ("", "!!", "MTIz", forged, token[:-3], *out_of_range):
        with pytest.raises(InvalidArgument) as caught:
            decode_token(bad)
        assert caught.value.reason == "INVALID_PAGE_TOKEN"


def test_limits_default_when_zero_and_are_capped():
    assert (clamp(0, 3, 32), clamp(5, 3, 32), clamp(1000, 3, 32)) == (3, 5, 32)
