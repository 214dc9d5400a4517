import pytest
import tantivy

from memsvc.archive import keywords
from memsvc.archive.index import Archive
from memsvc.archive.keywords import KeywordQuery, Term
from memsvc.core.records import Record


def test_cjk_characters_are_tokens_and_other_words_are_stemmed():
    assert keywords.tokenize("Deploying 我們在沙盒裡 テスト 한국 café_2 studies") == [
        "deploy", "我", "們", "在", "沙", "盒", "裡", "テ", "ス", "ト", "한", "국", "cafe", "2", "studi"]


def test_tantivy_and_python_agree_on_tokens(tmp_path):
    """The archive (Rust) and recent search (Python) must split text the same way."""
    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    schema = schema_builder.build()
    index = tantivy.Index(schema, path=str(tmp_path))
    index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    text = "Ünïcode ÉTÉ 混合text123 カタカナ ひらがな 한글 x_y deployments"
    writer.add_document(tantivy.Document(content=text))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    for token in keywords.tokenize(text):
        assert searcher.doc_freq("content", token) == 1, token


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
