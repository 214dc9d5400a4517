"""summary.json: shape, rules, reply parsing, entry selection, storage."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from memsvc.summary import rolling
from memsvc.summary.rolling import InvalidSummary, PastDiscussion, Summary


def past(topic: str, when: str = "2025-01-01 10:00") -> PastDiscussion:
    return PastDiscussion(topic=topic, description=f"about {topic}", direction="on", last_discussed=when)


@pytest.mark.parametrize("entry, fixed", [
    ("要：使用繁體中文", "Do: 使用繁體中文"),
    ("不要：使用簡體中文", "Don't: 使用簡體中文"),
    ("要:回覆簡短", "Do: 回覆簡短"),
    ("する：テストを書く", "Do: テストを書く"),
    ("しない：金曜日にデプロイ", "Don't: 金曜日にデプロイ"),
    ("Do: keep answers short", "Do: keep answers short"),
    ("Don't: deploy on Fridays", "Don't: deploy on Fridays"),
    ("don\u2019t:use tabs", "Don't: use tabs"),
    ("DO NOT: force-push", "Don't: force-push"),
    ("Never deploy on Fridays", "Do: Never deploy on Fridays"),
    ("要求：x", "Do: 要求：x"),
    ("Do:   ", None),
])
def test_key_decisions_get_english_markers(entry, fixed):
    assert rolling.rule(entry) == fixed


def test_normalized_rewrites_dedupes_and_keeps_the_limits():
    decisions = ["要：A", "Do: A"] + [f"Don't: rule {n}" for n in range(10)]
    pasts = [past(f"t{n}", f"2025-01-{n + 1:02d} 09:00") for n in range(10)]
    fixed = rolling.within_rules(Summary(key_decisions=decisions, past_discussions=pasts))
    assert fixed.key_decisions == ["Do: A"] + [f"Don't: rule {n}" for n in range(7)]
    assert [item.topic for item in fixed.past_discussions] == [f"t{n}" for n in range(2, 10)]
    assert all(e.startswith(("Do: ", "Don't: ")) for e in fixed.key_decisions)


VALID = '{"key_decisions": ["Do: x"], "past_discussions": [], "note": 1}'


@pytest.mark.parametrize("reply", [
    f"<summary>{VALID}</summary>",
    f"Here it is:\n<summary>\n```json\n{VALID}\n```\n</summary>",
    f"```json\n{VALID}\n```",
    f"Sure! {VALID} Hope that helps.",
    f"```json\n{{\"only\": 1}}\n```\n<summary>{VALID}</summary>",
])
def test_reply_parsing_takes_the_first_valid_summary(reply):
    parsed = rolling.parse_reply(reply)
    assert parsed.key_decisions == ["Do: x"] and parsed.extra == {"note": 1}


@pytest.mark.parametrize("reply", ["no json here", "<summary>{broken</summary>", '{"key_decisions": []}',
                                   '<summary>["a list"]</summary>',
                                   '{"key_decisions": "not a list", "past_discussions": []}'])
def test_replies_without_a_valid_summary_are_refused(reply):
    with pytest.raises(InvalidSummary):
        rolling.parse_reply(reply)


def test_two_of_three_keys_make_a_summary():
    assert rolling.from_dict({"key_decisions": [], "current_discussion": {"topic": "t"}}).current_discussion
    with pytest.raises(InvalidSummary, match="2 of"):
        rolling.from_dict({"past_discussions": []})


def test_save_and_load_keep_unknown_keys(tmp_path: Path):
    path = tmp_path / "summary.json"
    original = rolling.from_dict({"key_decisions": ["Do: a"], "past_discussions": [], "mood": {"x": [1, 2]}})
    rolling.save(path, original)
    assert json.loads(path.read_text())["mood"] == {"x": [1, 2]}
    assert rolling.load(path) == original


def test_listing_numbers_every_entry_and_selection_uses_the_numbers():
    whole = Summary(key_decisions=["Do: a", "Don't: b", "Do: c"], past_discussions=[past("p1"), past("p2")],
                    current_discussion=rolling.CurrentDiscussion(topic="now"), extra={"k": 1})
    text = rolling.listing(whole)
    assert "K1. Do: a" in text and "K3. Do: c" in text and "P2. p2:" in text and "C. now:" in text
    picked = rolling.only(whole, {1, 3, 9}, {2}, current_discussion=False)
    assert picked.key_decisions == ["Do: a", "Do: c"] and [p.topic for p in picked.past_discussions] == ["p2"]
    assert picked.current_discussion is None and picked.extra == {"k": 1}
    pruned = rolling.without(whole, {2}, {1})
    assert pruned.key_decisions == ["Do: a", "Do: c"] and [p.topic for p in pruned.past_discussions] == ["p2"]
    assert pruned.current_discussion == whole.current_discussion
    assert whole.key_decisions == ["Do: a", "Don't: b", "Do: c"]  # the cached original is untouched
    assert rolling.listing(Summary()) == "(empty)"


def test_discussed_since_drops_older_past_discussions_and_keeps_unreadable_ones():
    whole = Summary(past_discussions=[past("old", "2025-01-01 09:59"), past("same", "2025-01-01 10:00"),
                                      past("new", "2025-01-02 08:00"), past("odd", "last week")])
    kept = rolling.discussed_since(whole, datetime(2025, 1, 1, 10, 0, 42))
    assert [item.topic for item in kept.past_discussions] == ["same", "new", "odd"]


def test_turn_context_is_a_prior_summary_json_block():
    text = rolling.turn_context(Summary(key_decisions=["Do: a"]))
    assert text.startswith("Prior summary:\n```json\n") and text.endswith("\n```")
    assert json.loads(text.split("```json\n")[1].rsplit("\n```", 1)[0])["key_decisions"] == ["Do: a"]
