"""Counting a run's tokens: exactly where the model family's tokenizer ships
offline, otherwise with an estimate that errs high.

Owns which tokenizer family a model belongs to, the tokenizers themselves
(the BPE files bundled in the quicktok-v1 package, ids identical to
tiktoken's: o200k_base for GPT-4o, GPT-4.1, GPT-5, o-series and gpt-oss;
cl100k_base for GPT-4 and GPT-3.5; llama3; qwen3 for Qwen 2, 2.5 and 3),
each loaded on first use and shared, the estimate for every other family,
and how a chat message is framed (the OpenAI cookbook's 3 tokens per
message, 1 per name, 3 priming the reply). Must never look up a window:
the model table does.

The estimate (Claude, Gemini, Mistral, DeepSeek, anything unknown): each
Han, kana or hangul character counts 1 token, and the rest is counted with
o200k_base and multiplied by ESTIMATE_MARGIN. Tokenizers of those families
are not published for offline use, so the margin cannot be checked here; it
is chosen so that text a less efficient tokenizer splits finer still fits.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable

import quicktok

from memsvc.fit.chat import ChatMessage

PER_MESSAGE = 3
PER_NAME = 1
PER_CALL = 3
REPLY_PRIMING = 3
PART_TOKENS = 1000
"A content part other than text (an image, audio, a file) counts this much, whatever its size."
ESTIMATE_MARGIN = 1.3
ESTIMATE_NAME = "estimate (o200k_base x1.3, CJK 1 per character)"
ESTIMATE_BASE = "o200k_base"
_CJK = re.compile("[\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
                  "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]+")
"Runs of Han, kana and hangul, with CJK punctuation and full-width forms."
_FAMILIES = (  # first match wins: gpt-4o before gpt-4
    ("o200k_base", re.compile(r"(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[134])\b")),
    ("cl100k_base", re.compile(r"(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada)\b")),
    ("llama3", re.compile(r"(meta-)?llama-?3\b")),
    ("qwen3", re.compile(r"(qwen-?2|qwen-?2\.5|qwen-?3|qwq)\b")),
)
REMEMBERED_MESSAGES = 100_000
"Message counts kept per tokenizer (a few MB; forgotten all at once when full)."
_loaded: dict[str, Callable[[str], int]] = {}
_remembered: dict[str, dict[tuple[int, int], int]] = {}
_loading = threading.Lock()


def family(model: str) -> str:
    """The tokenizer of `model` ("gpt-4o", "openai/gpt-4o", "llama3.1:8b"...), or "" for the estimate."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    for tokenizer, pattern in _FAMILIES:
        if pattern.match(name):
            return tokenizer
    return ""


def loaded(model: str) -> bool:
    """True when counting for `model` needs no tokenizer load (0.1-0.3 s, once per process)."""
    return (family(model) or ESTIMATE_BASE) in _loaded


def _tokenizer(name: str) -> Callable[[str], int]:
    count = _loaded.get(name)
    if count is None:
        with _loading:
            count = _loaded.get(name)
            if count is None:
                count = _loaded[name] = quicktok.get_encoding(name).count
    return count


class Counter:
    """Counts text and chat messages for one model; thread-safe."""

    def __init__(self, model: str):
        tokenizer = family(model)
        self.exact = bool(tokenizer)
        self.name = tokenizer or ESTIMATE_NAME
        self._count = _tokenizer(tokenizer or ESTIMATE_BASE)
        self._roles: dict[str, int] = {}
        self._known = _remembered.setdefault(self.name, {})

    def text(self, text: str) -> int:
        if not text:
            return 0
        if self.exact:
            return int(self._count(text))
        if text.isascii():
            return math.ceil(self._count(text) * ESTIMATE_MARGIN)
        rest, runs = _CJK.subn(" ", text)  # a space per run keeps the words around it apart
        return len(text) - len(rest) + runs + math.ceil(self._count(rest) * ESTIMATE_MARGIN)

    def message(self, message: ChatMessage) -> int:
        """The message's tokens; remembered by its text, since an agent resends the same messages every call."""
        key = (hash(message.raw), len(message.raw))
        tokens = self._known.get(key)
        if tokens is None:
            if len(self._known) >= REMEMBERED_MESSAGES:
                self._known.clear()
            tokens = self._known[key] = self._message(message)
        return tokens

    def _message(self, message: ChatMessage) -> int:
        tokens = PER_MESSAGE + self._role(message.role) + self.text(message.text) + PART_TOKENS * message.parts
        if message.name:
            tokens += PER_NAME + self.text(message.name)
        for call in message.calls:
            tokens += PER_CALL + self.text(f"{call.id} {call.name} {call.arguments}")
        return tokens + self.text(message.call_id)

    def _role(self, role: str) -> int:
        count = self._roles.get(role)
        if count is None:
            count = self._roles[role] = self.text(role)
        return count
