"""What a keyword is and when a message contains one, in any script.

One tokenizer serves both tiers: Tantivy indexes archived messages with
`TOKEN_PATTERN` (the same regex, run by Rust) and `contains` applies it in
Python to recent messages, so a keyword finds a message the same way whether
it is recent or archived. Han, kana and hangul characters are one token each
(those scripts put no spaces between words); every other run of word
characters is one token. Matching is case-insensitive.

A query is split on spaces into words; a message matches when it has every
word: a one-token word as the start of one of its tokens (`deploy` finds
`deployment`), a CJK word or a multi-token word as consecutive tokens (`沙盒`
finds `我們在沙盒裡測試`). Must never touch an index.
"""

from __future__ import annotations

import math

import msgspec
import tantivy

SCRIPTS_WITHOUT_SPACES = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
TOKEN_PATTERN = f"[{SCRIPTS_WITHOUT_SPACES}]|[^\\W{SCRIPTS_WITHOUT_SPACES}]+"
ANALYZER_NAME = "memsvc_words"

BM25_K1 = 1.2
BM25_B = 0.75


def analyzer() -> tantivy.TextAnalyzer:
    """The one tokenizer, run by Tantivy for the archive and for recent messages alike."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN)).filter(
        tantivy.Filter.lowercase()).build()


_ANALYZER = analyzer()


def tokenize(text: str) -> list[str]:
    return _ANALYZER.analyze(text)


def _one_token_per_character(token: str) -> bool:
    # A character of a script without spaces is a token on its own: doubled, it stays two tokens.
    return len(token) == 1 and len(tokenize(token * 2)) == 2


class Word(msgspec.Struct, frozen=True):
    tokens: tuple[str, ...]

    @property
    def is_prefix(self) -> bool:
        """A single non-CJK token matches any token it starts."""
        return len(self.tokens) == 1 and not _one_token_per_character(self.tokens[0])


def parse(query: str) -> list[Word]:
    """The words of a query; punctuation-only words are dropped."""
    words = []
    for chunk in query.split():
        tokens = tuple(tokenize(chunk))
        if tokens and Word(tokens) not in words:
            words.append(Word(tokens))
    return words


def _has(tokens: list[str], word: Word) -> int:
    """How many times `word` occurs in `tokens`."""
    if word.is_prefix:
        return sum(token.startswith(word.tokens[0]) for token in tokens)
    width = len(word.tokens)
    first = word.tokens[0]
    return sum(1 for start, token in enumerate(tokens)
               if token == first and tuple(tokens[start:start + width]) == word.tokens)


def contains(text: str, words: list[Word]) -> bool:
    tokens = tokenize(text)
    return all(_has(tokens, word) for word in words)


def bm25(text: str, words: list[Word], doc_freq: dict[str, int], total_docs: int, average_tokens: float) -> float:
    """Okapi BM25 of `text`, with the archive's statistics, as Tantivy scores it.

    Lets recent messages (searched in memory) rank against archived ones
    (scored by Tantivy) on one scale.
    """
    tokens = tokenize(text)
    norm = 1 - BM25_B + BM25_B * len(tokens) / max(average_tokens, 1.0)
    score = 0.0
    for word in words:
        frequency = _has(tokens, word) if not word.is_prefix else tokens.count(word.tokens[0])
        for token in word.tokens:
            containing = doc_freq.get(token, 0)
            idf = math.log(1 + (total_docs - containing + 0.5) / (containing + 0.5))
            score += idf * frequency * (BM25_K1 + 1) / (frequency + BM25_K1 * norm)
    return score
