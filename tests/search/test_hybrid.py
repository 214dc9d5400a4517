"""The evidence fusion: each list weighs by how decisive its own scores are for this query."""

from __future__ import annotations

from memsvc.search.hybrid import FusionTuning, Ranking, fuse


def test_a_decisive_list_outweighs_a_flat_one_in_both_directions():
    decisive_keyword = Ranking([1, 2, 3, 4], [9.0, 1.0, 0.9, 0.8])
    flat_semantic = Ranking([5, 6, 7, 1], [0.61, 0.60, 0.60, 0.59])
    assert fuse(decisive_keyword, flat_semantic)[0].id == 1
    flat_keyword = Ranking([1, 2, 3, 4], [2.0, 1.9, 1.9, 1.8])
    decisive_semantic = Ranking([5, 6, 7, 8], [0.9, 0.2, 0.15, 0.1])
    assert fuse(flat_keyword, decisive_semantic)[0].id == 5


def test_the_same_keyword_match_leads_a_flat_semantic_list_and_yields_to_a_decisive_one():
    keyword = Ranking([1, 2, 3, 4, 5], [4.0, 1.0, 1.0, 1.0, 1.0])
    flat = Ranking([9, 6, 7, 8, 10], [0.7, 0.6, 0.6, 0.6, 0.6])
    decisive = Ranking([9, 6, 7, 8, 10], [0.7, 0.2, 0.2, 0.2, 0.2])
    assert fuse(keyword, flat)[0].id == 1
    assert fuse(keyword, decisive)[0].id == 9


def test_the_same_close_paraphrase_leads_a_flat_keyword_list_and_yields_to_a_decisive_one():
    semantic = Ranking([9, 6, 7, 8, 10], [0.7, 0.5, 0.5, 0.5, 0.5])
    decisive = Ranking([1, 2, 3, 4, 5], [4.0, 0.5, 0.5, 0.5, 0.5])
    flat = Ranking([1, 2, 3, 4, 5], [4.0, 3.6, 3.6, 3.6, 3.6])
    assert fuse(decisive, semantic)[0].id == 1
    assert fuse(flat, semantic)[0].id == 9


def test_cosines_all_alike_leave_the_keyword_order_intact():
    keyword = Ranking([1, 2, 3], [3.0, 2.0, 1.0])
    fused = fuse(keyword, Ranking([7, 3, 8], [0.5, 0.5, 0.5]))
    assert [c.id for c in fused][:2] == [1, 2]


def test_each_candidate_keeps_its_place_and_raw_score_in_each_list():
    fused = {c.id: c for c in fuse(Ranking([1, 2], [3.5, 1.25]), Ranking([2, 7], [0.8, 0.4]))}
    assert set(fused) == {1, 2, 7}
    assert (fused[2].keyword_rank, fused[2].keyword_score, fused[2].semantic_rank, fused[2].semantic_score) == (
        2, 1.25, 1, 0.8)
    assert (fused[1].semantic_rank, fused[1].semantic_score) == (None, None)
    assert (fused[7].keyword_rank, fused[7].keyword_score) == (None, None)


def test_one_list_alone_keeps_its_order_and_ties_go_to_the_newer_message():
    only = fuse(Ranking([], []), Ranking([4, 9, 2], [0.9, 0.5, 0.5]))
    assert [c.id for c in only] == [4, 9, 2]
    assert fuse(Ranking([], []), Ranking([], [])) == []


def test_the_keyword_weight_moves_the_balance():
    keyword, semantic = Ranking([1, 2], [5.0, 1.0]), Ranking([3, 4], [0.9, 0.3])
    assert fuse(keyword, semantic, FusionTuning(keyword_weight=30.0))[0].id == 1
    assert fuse(keyword, semantic, FusionTuning(keyword_weight=0.1))[0].id == 3


def test_a_list_whose_best_is_not_above_zero_carries_no_evidence():
    fused = {c.id: c.score for c in fuse(Ranking([1, 2], [2.0, 1.0]), Ranking([3, 2], [-0.1, -0.2]))}
    assert fused == fuse_keyword_alone()


def fuse_keyword_alone() -> dict[int, float]:
    """What the keyword list gives 1, 2 and 3 (missing: at most its last) with no semantic evidence."""
    return {c.id: c.score for c in fuse(Ranking([1, 2], [2.0, 1.0]), Ranking([3], [0.0]))}


def test_an_archived_match_semantic_cannot_see_is_judged_by_its_keyword_share():
    keyword, semantic = Ranking([1, 20], [4.0, 1.0]), Ranking([21, 22, 20], [0.9, 0.3, 0.2])
    assert fuse(keyword, semantic)[0].id == 21  # below the pool: at most the last cosine
    assert fuse(keyword, semantic, semantic_from=10)[0].id == 1  # archived: unseen, not dissimilar
