"""Ranked keyword search, hybrid with archived neighbours and reranking, through a real server."""

import threading

import pytest

from tests.support.archives import old_archive
from tests.support.rerank_server import RerankServer

pytestmark = pytest.mark.in_process

DECISION = "We decided that staging deploys go out on Tuesdays, after the smoke tests pass."
CHATTER = ["the weather is lovely today", "lunch was pasta again", "we should decide on a team name",
           "the build took ten minutes", "deploy the docs site whenever you like", "staging has new hardware"]


def keyword(client, query, **options):
    return client.search("s", query, match="keyword", **options).hits


def conversation(client, *messages):
    client.append("s", [("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(messages)])


def bury(client, count=20):
    """Push everything so far into the archive: filler pairs, then a compaction."""
    conversation(client, *[f"filler {n}" for n in range(count)])
    assert client.compact("s").removed


def test_a_natural_question_finds_its_message_recent_and_archived(client):
    conversation(client, *CHATTER[:3], DECISION, *CHATTER[3:])
    question = "What did we decide about the staging deploy?"
    assert keyword(client, question)[0].message.content == DECISION
    bury(client)
    hits = keyword(client, question)
    assert (hits[0].message.content, hits[0].source) == (DECISION, "archive")


def test_phrases_and_all_words_stay_strict(client):
    conversation(client, "the blue heron nests by the lake", "a blue car passed a grey heron", "blue skies")
    assert {h.message.content for h in keyword(client, "blue heron")} == {
        "the blue heron nests by the lake", "a blue car passed a grey heron", "blue skies"}
    assert [h.message.content for h in keyword(client, '"blue heron"')] == ["the blue heron nests by the lake"]
    assert [h.message.content for h in keyword(client, "car heron", require_all_words=True)] == [
        "a blue car passed a grey heron"]
    assert [h.message.content for h in keyword(client, "+car heron")] == ["a blue car passed a grey heron"]


@pytest.mark.parametrize("archived", [False, True])
def test_an_english_inflection_matches_in_both_tiers(client, archived):
    conversation(client, "we deployed the fixes yesterday", "ok")
    if archived:
        bury(client)
    assert [h.message.content for h in keyword(client, "deploying")] == ["we deployed the fixes yesterday"]


@pytest.mark.parametrize("archived", [False, True])
def test_a_question_without_spaces_ranks_by_shared_words(client, archived):
    conversation(client, "金融科技論壇的主要內容是區塊鏈支付和監管沙盒", "好的", "今天的午餐很好吃", "論文寫完了")
    if archived:
        bury(client)
    hits = keyword(client, "金融科技論壇講了什麼？")
    assert hits[0].message.content == "金融科技論壇的主要內容是區塊鏈支付和監管沙盒"
    assert keyword(client, "監管沙盒")[0].message.content == hits[0].message.content
    assert keyword(client, "沙盒論壇", require_all_words=True) == []  # as it is, consecutive


def test_archived_hits_come_with_their_archived_neighbours(client):
    conversation(client, *[f"turn {n}" for n in range(1, 5)], "the rollback plan uses blue-green switching",
                 *[f"turn {n}" for n in range(6, 10)])
    bury(client)
    for match in ("hybrid", "keyword"):
        hits = client.search("s", "rollback plan", match=match, with_context=True).hits
        run = [h for h in hits if h.run == 1]
        assert [(h.message.id, h.is_context, h.source) for h in run] == [
            (3, True, "archive"), (4, True, "archive"), (5, False, "archive"),
            (6, True, "archive")]
    plain = keyword(client, "rollback plan")
    assert [(h.message.id, h.is_context, h.run) for h in plain] == [(5, False, 0)]  # keyword: matches only


def reranked_server(make_server, reranker, *options):
    return make_server("--reranker", "http", "--reranker-base-url", reranker.base_url, "--reranker-model", "rr",
                       *options)


def test_the_reranker_reorders_the_fused_candidates(make_server):
    with RerankServer(scorer=lambda query, docs: [float("zebra" in doc) for doc in docs]) as reranker:
        server = reranked_server(make_server, reranker)
        with server.client() as client:
            conversation(client, "deploy notes: deploy deploy deploy", "ok", "a zebra mentioned a deploy", "ok")
            hits = client.search("s", "deploy", match="hybrid", limit=1, include_window=True).hits
            assert [h.message.content for h in hits if not h.is_context] == ["a zebra mentioned a deploy"]
        body = reranker.received[0]
        assert body["query"] == "deploy" and body["model"] == "rr"
        assert set(body["documents"]) >= {"deploy notes: deploy deploy deploy", "a zebra mentioned a deploy"}


def test_a_hung_reranker_falls_back_to_the_fused_order_and_blocks_nothing(make_server):
    plain = make_server()
    with plain.client() as client:
        conversation(client, "deploy notes: deploy deploy deploy", "ok", "a zebra mentioned a deploy", "ok")
        hits = client.search("s", "deploy", match="hybrid", include_window=True, limit=2).hits
        fused = [h.message.id for h in hits if not h.is_context]
    plain.terminate()
    with RerankServer() as reranker:
        reranker.hang()
        server = reranked_server(make_server, reranker, "--reranker-timeout-seconds", "1")  # the same data
        with server.client() as client:
            answer = {}
            search = threading.Thread(target=lambda: answer.update(hits=client.search(
                "s", "deploy", match="hybrid", include_window=True, limit=2, timeout=20).hits))
            search.start()
            appended = [client.append("s", [("user", f"while waiting {n}")]) for n in range(5)]
            assert search.is_alive()  # the rerank is still hanging, and Appends went through meanwhile
            assert len(appended) == 5 and len(keyword(client, "waiting")) == 5
            search.join(20)
            assert [h.message.id for h in answer["hits"] if not h.is_context] == fused
        assert len(reranker.received) == 1


def test_a_server_on_an_old_data_directory_finds_messages_only_the_archive_holds(data_dir, make_server):
    old_archive(data_dir / ".store", {"s": ["the sandboxes were reset on friday", "ok"]})
    (data_dir / "sessions" / "s").mkdir(parents=True)
    (data_dir / "sessions" / "s" / ".next_id").write_text("3")
    server = make_server()
    with server.client() as client:
        client.append("s", [("user", "a newer sandbox question")])
        hits = client.search("s", "sandbox", match="keyword").hits
        assert {(h.message.content, h.source) for h in hits} == {
            ("the sandboxes were reset on friday", "archive"), ("a newer sandbox question", "recent")}
