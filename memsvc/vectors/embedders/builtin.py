"""The built-in embedder: feature hashing, no model, no download, no network.

Owns the features (words, word pairs, in-word trigrams; character unigrams
and bigrams for scripts written without spaces) and their weights. Must never
depend on anything outside numpy and the standard library: it is the
embedded default.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence

import numpy as np

from memsvc.vectors.embedders.base import Embedder, unit_length

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
_STOP_CHARACTERS = ("的了是在我你他她它們们這这那有和就不也都而及與与之其啊吧呢嗎吗喔哦"
                    "のはがをにでともたてしいるかなよねへや")
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
    mixed: np.ndarray = values ^ (values >> np.uint64(31))
    return mixed


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
    found: np.ndarray = sorted_set[at] == values
    return found


def no_space_share(texts: Sequence[str]) -> np.ndarray:
    """Per text, the share of its letters that belong to scripts written without spaces (0 to 1)."""
    classes, _ = _tables()
    shares = np.zeros(len(texts), dtype=np.float32)
    for row, text in enumerate(texts):
        if text.isascii():  # most text, and none of those scripts: a query's vector skips six numpy calls
            continue
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        kind = np.where(codes < 0x10000, classes[codes & 0xFFFF], _SEPARATOR)
        kind[(codes >= _ASTRAL_IDEOGRAPHS[0]) & (codes <= _ASTRAL_IDEOGRAPHS[1])] = _SCRIPT_WITHOUT_SPACES
        letters = np.count_nonzero(kind != _SEPARATOR)
        if letters:
            shares[row] = np.count_nonzero(kind == _SCRIPT_WITHOUT_SPACES) / letters
    return shares


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

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
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
        return unit_length(damped.reshape(count, self._dimension))


