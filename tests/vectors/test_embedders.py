"""Embedders: the builtin one's behaviour in three languages, the OpenAI-compatible
client against a real HTTP server on loopback, and the local model when installed."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from memsvc.core.config import Settings
from memsvc.core.errors import FailedPrecondition, InvalidSetting
from memsvc.vectors import embedders
from memsvc.vectors.embedders import local
from memsvc.vectors.embedders.base import EmbeddingFailed
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.embedders.local import LOCAL_MODEL_EXTRA, LocalModelEmbedder
from memsvc.vectors.embedders.openai import HttpEmbedder
from tests.support.embedding_server import EmbeddingServer, http_embedder

HAS_LOCAL_MODEL = local.installed()
needs_local_model = pytest.mark.skipif(
    not HAS_LOCAL_MODEL, reason=f"the local-model extra is not installed ({LOCAL_MODEL_EXTRA})")


def similarity(embedder: embedders.Embedder, query: str, texts: list[str]) -> list[float]:
    vectors = embedder.vectors([query, *texts])
    return (vectors[1:] @ vectors[0]).tolist()


@pytest.fixture(scope="module")
def builtin() -> BuiltinEmbedder:
    return BuiltinEmbedder(256)


def test_builtin_vectors_are_unit_length_float32_of_the_set_dimension(builtin):
    vectors = builtin.vectors(["hello world", "你好世界", "こんにちは世界", "!!! ???"])
    assert vectors.shape == (4, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    assert not vectors[3].any(), "text without words or characters has no features"
    assert BuiltinEmbedder(64).vectors(["x"]).shape == (1, 64)


def test_builtin_is_the_same_in_every_process(builtin):
    """No Python hash randomisation, no seeds: an index outlives the process that built it."""
    text = "Deterministic: 同じ結果 every time, 我們保證"
    script = ("import sys; from memsvc.vectors.embedders.builtin import BuiltinEmbedder; "
              f"sys.stdout.buffer.write(BuiltinEmbedder(256).vectors([{text!r}]).tobytes())")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert other == builtin.vectors([text]).tobytes()


def test_builtin_ranks_shared_wording_first_in_english(builtin):
    texts = ["The database migration failed with a timeout on the users table",
             "We agreed to deploy on Tuesdays, never on Fridays",
             "Lunch was great, the pasta place on the corner"]
    scores = similarity(builtin, "why did the migration of the database fail", texts)
    assert scores[0] == max(scores) and scores[0] > 0.3 > max(scores[1:])
    # In-word trigrams let inflections meet.
    for word, inflected, unrelated in [("deployment", "deploying it today", "the weather today"),
                                       ("tests", "testing the parser", "the weather report"),
                                       ("migrations", "the migration failed", "the lunch failed")]:
        related, other = similarity(builtin, word, [inflected, unrelated])
        assert related > other + 0.1


def test_builtin_finds_chinese_and_japanese_without_spaces(builtin):
    texts = ["我們在沙盒裡測試新的資料庫遷移", "今天午餐吃了拉麵", "データベースの移行は失敗しました",
             "We tested it in the sandbox"]
    chinese = similarity(builtin, "沙盒測試", texts)
    assert chinese[0] == max(chinese) and chinese[0] > 0.3
    japanese = similarity(builtin, "データベース移行", texts)
    assert japanese[2] == max(japanese) and japanese[2] > 0.3
    # Full-width Latin letters are the same word after NFKC.
    assert similarity(builtin, "ＳＡＮＤＢＯＸ", ["sandbox"])[0] > 0.99


def test_builtin_is_lexical_a_paraphrase_without_shared_words_is_missed(builtin):
    """Documented honestly: meaning without shared wording is beyond feature hashing."""
    scores = similarity(builtin, "automobile", ["I drive my car to work", "automobile insurance"])
    assert scores[1] > 0.5 and abs(scores[0]) < 0.2


def test_http_embedder_batches_authenticates_and_orders_by_index(tmp_path):
    with EmbeddingServer(dimension=32) as server:
        server.shuffle = True
        embedder = http_embedder(server.base_url, 32, "secret-key", model="test-model", batch_size=4)
        texts = [f"message {n} about topic {n % 3}" for n in range(10)]
        vectors = embedder.vectors(texts)
        assert [len(batch) for batch in server.inputs()] == [4, 4, 2]
        assert {request.authorization for request in server.received} == {"Bearer secret-key"}
        assert server.received[0].body["model"] == "test-model" and server.received[0].body["dimensions"] == 32
        assert np.allclose(vectors, BuiltinEmbedder(32).vectors(texts), atol=1e-6)


def test_http_embedder_retries_429_and_5xx_then_succeeds():
    with EmbeddingServer(dimension=16) as server:
        server.fail(2, status=503)
        embedder = http_embedder(server.base_url, 16, "", model="m")
        assert embedder.vectors(["hello"]).shape == (1, 16)
        server.fail(1, status=429)
        assert embedder.vectors(["again"]).shape == (1, 16)
        assert len(server.received) == 5


def test_http_embedder_gives_up_after_its_attempts_and_never_retries_a_4xx():
    with EmbeddingServer(dimension=16) as server:
        server.fail(10, status=500)
        embedder = http_embedder(server.base_url, 16, "", model="m", max_retries=2)
        with pytest.raises(EmbeddingFailed) as failed:
            embedder.vectors(["x"])
        assert failed.value.reason == "EMBEDDER_UNAVAILABLE" and len(server.received) == 3
        server.fail(1, status=400)
        with pytest.raises(EmbeddingFailed) as rejected:
            embedder.vectors(["x"])
        assert rejected.value.reason == "EMBEDDER_REJECTED" and len(server.received) == 4


def test_http_embedder_times_out_and_fails_when_nothing_listens():
    with EmbeddingServer(dimension=16) as server:
        server.delay = 1.0
        slow = http_embedder(server.base_url, 16, "", model="m", timeout=0.1, max_retries=1)
        with pytest.raises(EmbeddingFailed):
            slow.vectors(["x"])
        gone = server.base_url
    with pytest.raises(EmbeddingFailed):
        http_embedder(gone, 16, max_retries=0).vectors(["x"])


def test_http_embedder_refuses_vectors_of_another_dimension():
    with EmbeddingServer(dimension=16, answer_dimension=24) as server:
        with pytest.raises(FailedPrecondition) as refused:
            http_embedder(server.base_url, 16, "", model="m").vectors(["x"])
        assert refused.value.reason == "EMBEDDING_DIMENSION_UNEXPECTED"


def test_http_embedder_cuts_overlong_inputs():
    with EmbeddingServer(dimension=16) as server:
        http_embedder(server.base_url, 16, "", model="m", max_chars=100).vectors(["x" * 5000])
        assert server.inputs() == [["x" * 100]]


def test_factory_reads_the_settings(tmp_path, monkeypatch):
    assert isinstance(embedders.from_settings(Settings(embedder="builtin")), BuiltinEmbedder)
    assert embedders.from_settings(Settings(embedder="builtin", embedding_dimensions=48)).dimension == 48
    with pytest.raises(InvalidSetting, match="embedding_base_url"):
        embedders.from_settings(Settings(embedder="openai"))
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    http = embedders.from_settings(Settings(embedder="openai", embedding_base_url="http://127.0.0.1:9/v1",
                                            embedding_api_key_file=str(key_file)))
    assert isinstance(http, HttpEmbedder) and http.provider.http.headers["authorization"] == "Bearer from-file"
    assert http.name == "openai:text-embedding-3-small" and http.url == "http://127.0.0.1:9/v1/embeddings"
    monkeypatch.setenv(embedders.API_KEY_ENV, "from-env")
    from_env = embedders.from_settings(Settings(embedder="openai", embedding_base_url="http://x/v1"))
    assert from_env.provider.http.headers["authorization"] == "Bearer from-env"  # type: ignore[attr-defined]
    with pytest.raises(InvalidSetting, match="not a sentence-transformers model"):
        LocalModelEmbedder(str(tmp_path)) if HAS_LOCAL_MODEL else LocalModelEmbedder("")


@needs_local_model
def test_local_model_understands_a_paraphrase():
    model = embedders.from_settings(Settings(embedder="sentence-transformers"))
    assert model.name == "sentence-transformers:all-MiniLM-L6-v2" and model.dimension == 384
    scores = similarity(model, "how do I get a new password, I forgot mine",
                        ["To recover a lost login credential, use the account reset page",
                         "The quarterly sales figures look strong"])
    assert scores[0] > scores[1] + 0.2
