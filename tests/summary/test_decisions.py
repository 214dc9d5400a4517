"""The decision model's judgments, against a real chat-completions server on
loopback: which exchanges are noise, which entries they supersede, which
entries a request needs, and that a failed judgment keeps everything."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from memsvc.core import config
from memsvc.core.http import Provider
from memsvc.core.records import Record
from memsvc.summary import llm
from memsvc.summary.decisions import Judge, exchanges
from memsvc.summary.rolling import CurrentDiscussion, PastDiscussion, Summary
from tests.support.llm_server import Reply, error

WHOLE = Summary(key_decisions=["Do: use tabs", "Don't: deploy on Fridays", "Do: answer in English"],
                past_discussions=[PastDiscussion(topic="editor", last_discussed="2025-01-01 09:00"),
                                  PastDiscussion(topic="ci", last_discussed="2025-03-01 09:00")],
                current_discussion=CurrentDiscussion(topic="release"))


@pytest.fixture
def judge(tmp_path: Path, llm_server) -> Judge:
    settings = config.load({"data_dir": str(tmp_path), "summary_chunk_chars": "200"}, environ={})
    provider = Provider(llm_server.base_url, setting="llm_base_url", timeout=5, max_retries=0)
    return Judge(llm.Model(llm.Endpoint(provider), "judge"), settings)


def record(id_: int, role: str, text: str, when: datetime = datetime(2025, 3, 1, 10)) -> Record:
    return Record(id=id_, role=role, content=text, send_at=int(when.timestamp() * 1e9))


def test_exchanges_group_a_user_message_with_the_replies_after_it():
    records = [record(1, "assistant", "welcome"), record(2, "user", "hi"), record(3, "assistant", "hello"),
               record(4, "assistant", "anything else?"), record(5, "user", "no")]
    assert [[r.id for r in group] for group in exchanges(records)] == [[1], [2, 3, 4], [5]]


def test_noise_needs_the_confidence_threshold_and_superseded_entries_are_numbered(judge: Judge, llm_server):
    verdict = {"noise": [{"exchange": "E1", "confidence": 0.9}, {"exchange": 2, "confidence": "0.5"}],
               "superseded_key_decisions": ["K2"], "superseded_past_discussions": [1, "P9"]}
    llm_server.script("judge", "Here you go:\n```json\n" + json.dumps(verdict) + "\n```")
    pruning = judge.prune(["user: thanks!", "user: deploy on Friday after all"], WHOLE)
    assert pruning.noise == {0} and pruning.superseded_key_decisions == {2}
    assert pruning.superseded_past_discussions == {1, 9}
    (call,) = llm_server.calls("judge")
    assert "K2. Don't: deploy on Fridays" in call.system and "E2:\nuser: deploy on Friday" in call.user


def test_exchanges_go_in_batches_and_a_failed_batch_prunes_nothing(judge: Judge, llm_server):
    llm_server.script("judge", error(503), json.dumps({"noise": [{"exchange": "E2", "confidence": 1}]}))
    texts = ["a" * 150, "b" * 150]  # summary_chunk_chars 200: one exchange per batch
    pruning = judge.prune(texts, WHOLE)
    assert pruning.noise == {1} and len(llm_server.calls("judge")) == 2


def test_relevance_keeps_the_chosen_entries_after_dropping_stale_discussions(judge: Judge, llm_server):
    llm_server.script("judge", json.dumps({"key_decisions": [1, "K3"], "past_discussions": ["P1"],
                                           "current_discussion": "true"}))
    window = [record(10, "user", "what now?", datetime(2025, 2, 1, 8))]
    kept = judge.relevant(WHOLE, window, "ship the release")
    assert kept.key_decisions == ["Do: use tabs", "Do: answer in English"]
    assert [p.topic for p in kept.past_discussions] == ["ci"]  # "editor" was older than the window
    assert kept.current_discussion == WHOLE.current_discussion
    (call,) = llm_server.calls("judge")
    assert "editor" not in call.user and "Request:\nship the release" in call.user


@pytest.mark.parametrize("reply", [Reply("no json at all"), Reply('{"key_decisions": '), error(500)])
def test_a_failed_relevance_check_keeps_every_entry(judge: Judge, llm_server, reply):
    llm_server.script("judge", reply)
    assert judge.relevant(WHOLE, [], "anything") == WHOLE
