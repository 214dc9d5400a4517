import pytest
import tantivy

from memsvc.archive import keywords
from memsvc.archive.index import Archive
from memsvc.archive.keywords import KeywordQuery, Term
from memsvc.core.records import Record


def test_cjk_characters_are_tokens_and_other_words_are_stemmed():
    assert keywords.tokenize("Deploying 我們在沙盒裡 テスト 한국 café_2 studies") == [
        "deploy", "我", "們", "在", "沙", "盒", "裡", "テ", "ス", "ト", "한", "국", "cafe", "2", "studi"]


AGREEMENT_CORPUS = [
    # English inflections
    "We deployed it; they're deploying again, and deployments studies studied running ran",
    "Happily, the happiest cats' meows were meowing—loudly!",
    # punctuation
    "don't e-mail C++ U.S.A. foo.bar@baz.com (see: https://x.io/a?b=c#d) ... end.",
    "«Guillemets» „quotes“ 'single' \"double\" ¿qué? ¡sí! — – … · • /slash\\back",
    # underscores
    "snake_case_name __init__ _private trailing_ MAX_HISTORY_BYTES x_y_z",
    # accents and other Latin letters
    "Mâcon naïve résumé Ørsted Straße ÉTÉ Ünïcode façade coöperate Łódź",
    # CJK, kana, hangul, and mixed with Latin and digits
    "我們在沙盒裡測試部署，明天再試。",
    "明日はサンドボックスでテストします。カタカナ ひらがな",
    "한국어 문장입니다 한글",
    "混合text123 部署到staging環境 v2版本 ＣＪＫ全角",
    # digits
    "v2.3.1 3.14 10,000 1e9 0x1F 2026-12-01 12:45 ٣٤٥ ２０２６ ½ ²",
    # other scripts, symbols, whitespace and invisible characters
    "Привет мир Ελληνικά κείμενο 🙂 emoji👍here tab\there\nnew\u200bline",
]


def test_the_archive_analyzer_and_the_recent_tokenizer_agree_both_ways(tmp_path):
    """The archive (Tantivy, as the Archive registers its analyzer) and recent search (keywords.tokenize)
    see the same token stream for the same text: the same terms, in the same order, as often."""
    archive = Archive(tmp_path / ".store", commit_interval=0.01)
    try:
        sessions = [f"s{n}" for n in range(len(AGREEMENT_CORPUS))]
        for session, text in zip(sessions, AGREEMENT_CORPUS, strict=True):
            archive.appended(session, [Record(id=1, role="user", content=text, send_at=1)])
        archive.flush()
        streams = [keywords.tokenize(text) for text in AGREEMENT_CORPUS]
        assert all(len(stream) < 40 for stream in streams), "field lengths Tantivy stores exactly"
        searcher = archive.index.searcher()
        every_term = {term for term, _ in searcher.terms_with_prefix("content", "")}
        assert every_term == {token for stream in streams for token in stream}
        average = sum(map(len, streams)) / len(streams)
        for session, text, stream in zip(sessions, AGREEMENT_CORPUS, streams, strict=True):
            in_session = tantivy.Query.term_query(archive.schema, "session", session)
            indexed = dict(searcher.terms_with_prefix("content", "", filter_query=in_session))
            assert set(indexed) == set(stream), text  # every term of each, no other
            whole = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, in_session),
                (tantivy.Occur.Must, tantivy.Query.phrase_query(archive.schema, "content", stream))])
            assert searcher.search(whole, limit=1, count=True).count == 1, f"in this order: {text}"
            for token in set(stream):  # as often, in a text as long: the same BM25 score
                query = KeywordQuery(optional=(Term((token,)),))
                statistics = archive.statistics(query)
                [(_, score)] = archive.search(session, query, statistics, 10, 0, 2**63 - 1, 8)
                mine = keywords.term_score(stream.count(token), len(stream), Term((token,)),
                                           keywords.Statistics(statistics.doc_freq, statistics.total_docs, average))
                assert mine == pytest.approx(score, rel=1e-3), (text, token)
    finally:
        archive.close()


def test_a_question_is_a_bag_of_content_words():
    assert keywords.parse("What did we decide about the staging deploys?") == KeywordQuery(
        optional=(Term(("decid",)), Term(("stage",)), Term(("deploy",))))


def test_a_query_of_stop_words_only_keeps_them():
    assert keywords.parse("to be or not") == KeywordQuery(
        optional=(Term(("to",)), Term(("be",)), Term(("or",)), Term(("not",))))


def test_short_cjk_runs_stay_whole_and_questions_split_into_pairs():
    assert keywords.parse("沙盒") == KeywordQuery(optional=(Term(("沙", "盒")),))
    assert keywords.parse("金融論壇？") == KeywordQuery(optional=(
        Term(("金", "融", "論", "壇")), Term(("金", "融")), Term(("融", "論")), Term(("論", "壇"))))


def test_strict_forms():
    assert keywords.parse('"Blue herons" nest +Friday') == KeywordQuery(
        required=(Term(("blue", "heron")), Term(("friday",))), optional=(Term(("nest",)),))
    assert keywords.parse("deploy 沙盒測試 on friday", require_all=True) == KeywordQuery(
        required=(Term(("deploy",)), Term(("friday",)), Term(("沙", "盒", "測", "試"))))
    assert not keywords.parse(" ?! ")


@pytest.mark.parametrize("text, query, found", [
    ("我們在沙盒裡測試", "沙盒", True),
    ("沙子和盒子", "沙盒", False),                       # consecutive characters only
    ("明日はサンドボックスでテスト", "サンドボックス", True),
    ("The Sandbox failed", "sandbox", True),
    ("sandboxes everywhere", "sandbox", True),           # an inflection
    ("my-sandbox", "sandbox", True),
    ("the box", "sandbox", False),
    ("we deploy on monday", "deploy friday", True),      # any word
    ("we deploy on monday", "+deploy +friday", False),
    ("we deployed it on friday", '"deploy on friday"', False),
    ("we deploy on friday", '"deploy on friday"', True),
    ("部署到 staging 環境", "staging 部署", True),
])
def test_matches(text, query, found):
    assert keywords.matches(keywords.tokenize(text), keywords.parse(query)) is found


def test_bm25_prefers_more_occurrences_and_rarer_words():
    term = Term(("deploy",))
    common = keywords.Statistics({"deploy": 400}, 1000, 5)
    rare = keywords.Statistics({"deploy": 10}, 1000, 5)
    assert keywords.term_score(2, 3, term, rare) > keywords.term_score(1, 2, term, rare) > 0
    assert keywords.term_score(1, 2, term, common) < keywords.term_score(1, 2, term, rare)


def test_recent_scores_are_on_the_archive_scale(tmp_path):
    """A message scored in Python (recent) gets the score Tantivy gives it (archived)."""
    texts = ["deploy the staging cluster on friday", "friday friday deploys", "沙盒 deploy",
             "nothing to see here at all, really nothing"]
    archive = Archive(tmp_path / ".store", commit_interval=0.01)
    try:
        archive.appended("s", [Record(id=i, role="user", content=t, send_at=i) for i, t in enumerate(texts, 1)])
        archive.flush()
        query = keywords.parse("deploy friday 沙盒")
        archived = archive.statistics(query)
        lengths = [len(keywords.tokenize(text)) for text in texts]
        statistics = keywords.Statistics(archived.doc_freq, archived.total_docs, sum(lengths) / len(lengths))
        for record, score in archive.search("s", query, archived, 10, 0, 2**63 - 1, 8):
            words = keywords.tokenize(record.content)
            mine = sum(keywords.term_score(keywords.occurrences(words, term), len(words), term, statistics)
                       for term in query.terms)
            assert mine == pytest.approx(score, rel=1e-3), record.content
    finally:
        archive.close()
