"""What a keyword query means, and the terms a message is indexed under, in any script.

One analyzer serves both tiers: Tantivy indexes archived messages with it and
`tokenize` runs the very same analyzer (Rust, through tantivy-py) on recent
messages, so a word finds a message the same way whether it is recent or
archived. Han, kana and hangul characters are one token each (those scripts
put no spaces between words); every other run of letters and digits is one
token (`max_history_bytes` is three), lowercased, folded to ASCII where
Latin letters carry marks (`Mâcon` is `macon`) and stemmed by Snowball's
English stemmer (`deploying`, `deployed` and `deployment` are all `deploy`). The archive's index
is built with it: a change to it needs a new reindex.VERSION, and the archive then re-indexes itself.

A query is ranked, not a filter (`parse`): any of its words may match, and
BM25 ranks messages holding more of them, and rarer ones, first. English stop
words are left out of the ranking (unless the query has nothing else). A run
of CJK characters of up to two characters must appear as it is, consecutive;
a longer run (a question in Chinese or Japanese) ranks by its overlapping
character pairs, and the whole run scores on top when it appears as it is.
Strict matching stays: a `"quoted phrase"` must appear word for word, a
`+word` must appear, and `require_all` requires every word (a CJK run as it
is). In a query of prose (more than QUOTES_ARE_EMPHASIS_PAST words outside
the quotes: an agent passing on a user's request) quotes are emphasis: the
phrase is not required, it ranks messages holding it word for word first.
Must never touch an index.
"""

from __future__ import annotations

import functools
import math
import re

import msgspec
import tantivy

SCRIPTS_WITHOUT_SPACES = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
TOKEN_PATTERN = f"[{SCRIPTS_WITHOUT_SPACES}]|[^\\W_{SCRIPTS_WITHOUT_SPACES}]+"
ANALYZER_NAME = "memsvc_words"

QUOTES_ARE_EMPHASIS_PAST = 8
"Words outside quotes past which a query is prose (an agent passing a user's request), not search syntax."

IDF_FLOOR = 0.01
"Common words still match, but rank like stop words."
BM25_K1 = 1.2
BM25_B = 0.75

# Function words of English requests and questions: they match most messages and say nothing.
STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could d did do does doing don done down during each either else ever few for from further get
gets got had has have having he her here hers herself him himself his how i if in into is it its itself just let
ll m me might more most must my myself no nor not now of off on once one only or other our ours ourselves out
over own re s same shall she should so some such t than that the their theirs them themselves then there these
they this those through to too under until up us ve very was we were what when where which while who whom whose
why will with would you your yours yourself yourselves
""".split())


def _builder() -> tantivy.TextAnalyzerBuilder:
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN)).filter(
        tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold())


def analyzer() -> tantivy.TextAnalyzer:
    """The one analyzer, run by Tantivy for the archive and for recent messages alike."""
    return _builder().filter(tantivy.Filter.stemmer("english")).build()


_ANALYZER = analyzer()
_SURFACE = _builder().build()
_WORD_RUN = re.compile(r"\w+")
_QUOTED = re.compile(r'"([^"]*)"?')


def tokenize(text: str) -> list[str]:
    """The terms `text` is indexed under, in order."""
    return _ANALYZER.analyze(text)


@functools.lru_cache(maxsize=65536)
def _one_token_per_character(token: str) -> bool:
    # A character of a script without spaces is a token on its own: doubled, it stays two tokens.
    return len(token) == 1 and len(_SURFACE.analyze(token * 2)) == 2


class Term(msgspec.Struct, frozen=True):
    """One term, or several that must be consecutive (a phrase)."""

    tokens: tuple[str, ...]


class KeywordQuery(msgspec.Struct, frozen=True):
    """Messages must hold every `required` term and, when there is none, at least one `optional` one;
    all terms that match add to the score."""

    required: tuple[Term, ...] = ()
    optional: tuple[Term, ...] = ()

    @property
    def terms(self) -> tuple[Term, ...]:
        return self.required + self.optional

    def __bool__(self) -> bool:
        return bool(self.required or self.optional)


class _Words(msgspec.Struct):
    """A stretch of query text split into English stems and runs of CJK characters."""

    stems: list[str]
    stop: list[bool]
    cjk_runs: list[tuple[str, ...]]


def _split(text: str) -> _Words:
    words = _Words([], [], [])
    for piece in _WORD_RUN.findall(text):
        run: list[str] = []
        for surface, stem in zip(_SURFACE.analyze(piece), tokenize(piece), strict=True):
            if _one_token_per_character(surface):
                run.append(stem)
                continue
            if run:
                words.cjk_runs.append(tuple(run))
                run = []
            words.stems.append(stem)
            words.stop.append(surface in STOP_WORDS)
        if run:
            words.cjk_runs.append(tuple(run))
    return words


def _ranked_run(run: tuple[str, ...]) -> list[Term]:
    """Up to two characters: as they are. Longer: every character pair, plus the whole run."""
    if len(run) <= 2:
        return [Term(run)]
    return [Term(run)] + [Term(run[start:start + 2]) for start in range(len(run) - 1)]


@functools.lru_cache(maxsize=1024)
def parse(query: str, require_all: bool = False) -> KeywordQuery:
    """The terms of a query; an empty KeywordQuery when it holds no word. Cached (the result is
    immutable): where a search runs is decided from the same terms it then searches for."""
    required: list[Term] = []
    optional: list[Term] = []
    phrases = [Term(tokens) for phrase in _QUOTED.findall(query) if (tokens := tuple(tokenize(phrase)))]
    rest = _QUOTED.sub(" ", query)
    if len(_WORD_RUN.findall(rest)) > QUOTES_ARE_EMPHASIS_PAST:
        # A request in prose quotes for emphasis: the phrase ranks word-for-word matches first, its words count.
        optional += phrases
        rest = query.replace('"', " ")
    else:
        required += phrases
    loose: list[str] = []
    for chunk in rest.split():
        if chunk.startswith("+") and len(chunk) > 1:
            must = _split(chunk[1:])
            required += [Term((stem,)) for stem in must.stems] + [Term(run) for run in must.cjk_runs]
        else:
            loose.append(chunk)
    words = _split(" ".join(loose))
    content = [stem for stem, stop in zip(words.stems, words.stop, strict=True) if not stop]
    if not content and not words.cjk_runs and not required:
        content = words.stems  # a query of stop words only still means something
    if require_all:
        required += [Term((stem,)) for stem in content] + [Term(run) for run in words.cjk_runs]
    else:
        optional += [Term((stem,)) for stem in content]
        for run in words.cjk_runs:
            optional += _ranked_run(run)
    kept = list(dict.fromkeys(required))
    return KeywordQuery(tuple(kept), tuple(term for term in dict.fromkeys(optional) if term not in kept))


def occurrences(tokens: list[str], term: Term) -> int:
    """How many times `term` occurs in `tokens` (a phrase: consecutively)."""
    if len(term.tokens) == 1:
        return tokens.count(term.tokens[0])
    width, first = len(term.tokens), term.tokens[0]
    return sum(1 for start, token in enumerate(tokens)
               if token == first and tuple(tokens[start:start + width]) == term.tokens)


class Statistics(msgspec.Struct, frozen=True):
    """What BM25 needs to know of the whole collection: as Tantivy counts it for the archive."""

    doc_freq: dict[str, int]
    total_docs: int
    average_tokens: float = 0.0
    "Mean length in terms, for term_score (the archive's own is Tantivy's)."

    def idf(self, token: str) -> float:
        """Robertson-Sparck Jones: a word in half the messages or more says next to nothing (IDF_FLOOR)."""
        containing = self.doc_freq.get(token, 0)
        total = max(self.total_docs, containing)
        return max(IDF_FLOOR, math.log((total - containing + 0.5) / (containing + 0.5)))

    def boost(self, term: Term) -> float:
        """What turns Tantivy's idf (ln(1 + ...), never below ln 2 for a word in every message) into `idf`."""
        tantivy_idf = 0.0
        for token in term.tokens:
            containing = self.doc_freq.get(token, 0)
            total = max(self.total_docs, containing)
            tantivy_idf += math.log(1 + (total - containing + 0.5) / (containing + 0.5))
        return sum(self.idf(token) for token in term.tokens) / tantivy_idf


def term_score(frequency: int, length: int, term: Term, statistics: Statistics) -> float:
    """Okapi BM25 of one term (a phrase: the sum of its tokens' idf), as the archive scores it."""
    if frequency <= 0:
        return 0.0
    norm = 1 - BM25_B + BM25_B * length / max(statistics.average_tokens, 1.0)
    idf = sum(statistics.idf(token) for token in term.tokens)
    return idf * frequency * (BM25_K1 + 1) / (frequency + BM25_K1 * norm)


def matches(tokens: list[str], query: KeywordQuery) -> bool:
    """Whether a message made of `tokens` satisfies the query's requirements."""
    if not all(occurrences(tokens, term) for term in query.required):
        return False
    return bool(query.required) or any(occurrences(tokens, term) for term in query.optional)
