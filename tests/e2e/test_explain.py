"""Search's `explain` option through a real server: each match says where it ranked in the keyword and semantic
rankings (each computed here on its own, with match=keyword and match=semantic), the fused and reranked scores,
and the tier holding it; without explain the reply is as before."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.rerank_server import RerankServer

pytestmark = pytest.mark.in_process

WINDOW = 4
ARCHIVED = ["The deploy freeze starts on Friday at noon.", "Noted: no deploys after Friday noon.",
            "The zebrafish team wants a bigger kiwi budget.", "They asked for more kiwi money.",
            "Freeze the staging database before the deploy.", "Staging database frozen."]
RECENT = ["Can we deploy the hotfix on Friday morning?", "Yes, before the freeze at noon.",
          "What time does the friday freeze begin?", "It begins at twelve o'clock.",
          "Lunch is pasta again today.", "The hotfix deploy went out fine.",
          "Our rollback plan uses blue-green switching.", "The freezer in the kitchen is broken.",
          "Remember to water the office plants.", "Deployment checklist updated."]
FILLERS = ["Sounds good to me.", "Thanks for the update!", "I will check the calendar.", "Coffee break?"]
QUERY = "deploy freeze friday"


def matches(hits):
    return [hit for hit in hits if not hit.is_context]


def conversation(client, messages):
    client.append("s", [("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(messages)])


@pytest.fixture
def tiered(make_server):
    """A session with archived messages, recent ones, and a window of WINDOW; its server and client."""
    server = make_server("--max-history-messages", str(WINDOW))
    with server.client() as client:
        conversation(client, ARCHIVED)
        conversation(client, FILLERS)
        assert client.compact("s").removed >= len(ARCHIVED)
        conversation(client, RECENT)
        yield client


def keyword_ranking(client) -> dict[int, tuple[int, float]]:
    hits = client.search("s", QUERY, match="keyword", limit=32).hits
    return {hit.message.id: (place, hit.score) for place, hit in enumerate(hits, start=1)}


def semantic_ranking(client) -> dict[int, tuple[range, float]]:
    """Id -> (the places it may hold, its similarity): messages of equal similarity (to float noise, which differs
    from one search to the next) may come in any order."""
    reply = client.search("s", QUERY, match="semantic", limit=32, include_window=True)
    assert reply.unsearched == 0
    scores = [round(hit.score, 5) for hit in matches(reply.hits)]
    return {hit.message.id: (range(sum(other > score for other in scores) + 1,
                                   sum(other >= score for other in scores) + 1), hit.score)
            for hit, score in zip(matches(reply.hits), scores, strict=True)}


def semantically(why, by_meaning, id_) -> bool:
    places, similarity = by_meaning.get(id_, (range(0, 1), 0.0))
    return why.semantic_rank in places and why.semantic_similarity == pytest.approx(similarity, abs=1e-6)


def test_hybrid_explains_each_match_by_the_keyword_and_semantic_rankings(tiered):
    by_keyword, by_meaning = keyword_ranking(tiered), semantic_ranking(tiered)
    reply = tiered.search("s", QUERY, match="hybrid", limit=32, include_window=True, explain=True)
    found = matches(reply.hits)
    assert len(found) == len(by_keyword.keys() | by_meaning.keys())  # every candidate fits in 32
    window_from = max(hit.message.id for hit in reply.hits) - WINDOW + 1
    for hit in found:
        why, id_ = hit.explanation, hit.message.id
        assert (why.keyword_rank, why.keyword_score) == by_keyword.get(id_, (0, 0.0)), hit
        assert semantically(why, by_meaning, id_), hit
        assert why.fused_score == hit.score and not why.reranked and why.rerank_score == 0.0
        assert why.tier == ("archive" if hit.source == "archive" else "window" if id_ >= window_from else "recent")
    kinds = {(why.keyword_rank > 0, why.semantic_rank > 0) for why in (hit.explanation for hit in found)}
    assert kinds == {(True, False), (True, True), (False, True)}  # keyword only (archived), both, meaning only
    assert {hit.explanation.tier for hit in found} == {"archive", "recent", "window"}
    assert all(hit.explanation is None for hit in reply.hits if hit.is_context)


def test_keyword_and_semantic_explain_their_own_ranking(tiered):
    by_keyword, by_meaning = keyword_ranking(tiered), semantic_ranking(tiered)
    for hit in tiered.search("s", QUERY, match="keyword", limit=32, explain=True).hits:
        why = hit.explanation
        assert (why.keyword_rank, why.keyword_score) == by_keyword[hit.message.id]
        assert (why.semantic_rank, why.fused_score, why.reranked) == (0, 0.0, False)
    found = matches(tiered.search("s", QUERY, match="semantic", limit=32, include_window=True, explain=True).hits)
    assert found
    for hit in found:
        why = hit.explanation
        assert semantically(why, by_meaning, hit.message.id)
        assert (why.keyword_rank, why.fused_score, why.tier != "archive") == (0, 0.0, True)


@pytest.mark.parametrize("match", ["keyword", "semantic", "hybrid"])
def test_without_explain_the_reply_is_unchanged(tiered, match):
    options = {"limit": 32, "include_window": True} if match != "keyword" else {"limit": 32, "with_context": True}
    plain = tiered.search("s", QUERY, match=match, **options)
    assert all(hit.explanation is None for hit in plain.hits)
    assert seen(plain) == seen(tiered.search("s", QUERY, match=match, explain=False, **options))
    explained = tiered.search("s", QUERY, match=match, explain=True, **options)
    assert any(hit.explanation is not None for hit in explained.hits)
    assert seen(dataclasses.replace(explained, hits=[dataclasses.replace(hit, explanation=None)
                                                     for hit in explained.hits])) == seen(plain)


def seen(reply):
    """A reply with its scores to 5 decimals: a similarity's float noise differs from one search to the next."""
    return dataclasses.replace(reply, hits=[dataclasses.replace(hit, score=round(hit.score, 5)) for hit in reply.hits])


def test_a_reranked_match_carries_the_rerankers_score(make_server):
    with RerankServer(scorer=lambda query, docs: [float("zebra" in doc) + 0.5 for doc in docs]) as reranker:
        server = make_server("--reranker", "http", "--reranker-base-url", reranker.base_url)
        with server.client() as client:
            conversation(client, ["deploy notes: deploy deploy deploy", "ok", "a zebra mentioned a deploy", "ok"])
            hits = matches(client.search("s", "deploy", match="hybrid", include_window=True, explain=True).hits)
    assert {hit.message.content: hit.explanation.rerank_score for hit in hits}["a zebra mentioned a deploy"] == 1.5
    for hit in hits:
        why = hit.explanation
        assert why.reranked and why.rerank_score == hit.score and why.fused_score not in (0.0, hit.score)
