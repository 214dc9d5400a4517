import pytest
import tantivy

from memsvc.archive import keywords


def test_cjk_characters_are_tokens_and_other_words_stay_whole():
    assert keywords.tokenize("Deploy 我們在沙盒裡 テスト 한국 café_2") == [
        "deploy", "我", "們", "在", "沙", "盒", "裡", "テ", "ス", "ト", "한", "국", "café_2"]


def test_tantivy_and_python_agree_on_tokens(tmp_path):
    """The archive (Rust) and recent search (Python) must split text the same way."""
    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    schema = schema_builder.build()
    index = tantivy.Index(schema, path=str(tmp_path))
    index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    text = "Ünïcode ÉTÉ 混合text123 カタカナ ひらがな 한글 x_y"
    writer.add_document(tantivy.Document(content=text))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    for token in keywords.tokenize(text):
        assert searcher.doc_freq("content", token) == 1, token


@pytest.mark.parametrize("text, query, found", [
    ("我們在沙盒裡測試", "沙盒", True),
    ("沙子和盒子", "沙盒", False),
    ("明日はサンドボックスでテスト", "サンドボックス", True),
    ("The Sandbox failed", "sandbox", True),
    ("sandboxes everywhere", "sandbox", True),     # a word's start
    ("my-sandbox", "sandbox", True),
    ("the box", "sandbox", False),
    ("we deploy on friday", "deploy friday", True),  # every word, any order
    ("we deploy on monday", "deploy friday", False),
    ("部署到 staging 環境", "staging 部署", True),
])
def test_contains(text, query, found):
    assert keywords.contains(text, keywords.parse(query)) is found


def test_parse_drops_punctuation_and_repeats():
    assert keywords.parse("?? sandbox sandbox 沙盒") == [keywords.Word(("sandbox",)), keywords.Word(("沙", "盒"))]


def test_bm25_prefers_more_occurrences_and_rarer_words():
    words = keywords.parse("deploy")
    stats = {"deploy": 10}
    once = keywords.bm25("deploy now", words, stats, 1000, 5)
    twice = keywords.bm25("deploy deploy now", words, stats, 1000, 5)
    assert twice > once > 0
    assert keywords.bm25("deploy now", words, {"deploy": 900}, 1000, 5) < once
