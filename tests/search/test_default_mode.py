"""A Search naming no match is hybrid, through a real server; a query_embedding alone stays semantic."""

from __future__ import annotations

import pytest

from memsvc.vectors.embedders.builtin import BuiltinEmbedder

pytestmark = pytest.mark.in_process

PLAN = "the rollback plan uses blue-green switching"


def test_no_match_named_searches_hybrid(client):
    client.append("s", [("user", PLAN), ("assistant", "noted"), ("user", "lunch was pasta again")])

    def found(**match):
        hits = client.search("s", "rollback plan", include_window=True, **match).hits
        return {h.message.content: h.score for h in hits if not h.is_context}

    unnamed = found()
    assert unnamed == found(match="hybrid")
    semantic = found(match="semantic")  # the old default, one argument away
    assert unnamed[PLAN] > semantic[PLAN]  # the keyword list's evidence counts too


def test_a_query_embedding_without_text_stays_semantic(client):
    client.append("s", [("user", PLAN), ("assistant", "noted"), ("user", "lunch was pasta again")])
    vector = BuiltinEmbedder(256).vectors(["rollback plan"])[0].tolist()
    hits = client.search("s", "", query_embedding=vector, include_window=True).hits
    best = max((h for h in hits if not h.is_context), key=lambda h: h.score)
    assert best.message.content == PLAN
