"""The decision model's judgments about a summary: which new exchanges are
noise and which entries they supersede (before summarizing), and which
entries a request needs (for a turn).

Owns what the decision model is shown, reading its JSON verdicts leniently,
and the rule that a failed judgment keeps everything. Must never write
anything, and never let a decision model's failure fail the caller.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import MemsvcError
from memsvc.core.records import Record
from memsvc.core.units import NANOS_PER_SECOND
from memsvc.runtime import tracing
from memsvc.summary import llm, rolling
from memsvc.summary.rolling import Summary

log = logging.getLogger(__name__)

NOISE_CONFIDENCE = 0.7
"An exchange is dropped as noise when the model is at least this sure."
MAX_REQUEST_CHARS = 4000
"The request text shown for relevance; its start says what it is about."
NOISE_PROMPT = "noise.v1.md"
RELEVANCE_PROMPT = "relevance.v1.md"
_NUMBER = re.compile(r"\d+")


class _Noise(msgspec.Struct):
    exchange: int | str
    confidence: float | str = 0.0


class _NoiseVerdict(msgspec.Struct):
    noise: list[_Noise] = []
    superseded_key_decisions: list[int | str] = []
    superseded_past_discussions: list[int | str] = []


class _RelevanceVerdict(msgspec.Struct):
    key_decisions: list[int | str] = []
    past_discussions: list[int | str] = []
    current_discussion: bool | str = False


class Pruning(msgspec.Struct):
    noise: set[int]
    "Exchanges (0-based) to leave out of the summary."
    superseded_key_decisions: set[int]
    "Key decisions (1-based) the new exchanges reverse or supersede."
    superseded_past_discussions: set[int]
    "Past discussions (1-based) likewise."


class UnreadableVerdict(ValueError):
    pass


Verdict = TypeVar("Verdict", _NoiseVerdict, _RelevanceVerdict)


def exchanges(records: Sequence[Record]) -> list[list[Record]]:
    """A user message and the replies after it; replies before any user message form their own."""
    groups: list[list[Record]] = []
    for record in records:
        if record.role == "user" or not groups:
            groups.append([])
        groups[-1].append(record)
    return groups


class Judge:
    """The decision model, asked about summaries."""

    def __init__(self, model: llm.Model, settings: Settings):
        self.model = model
        self.batch_chars = settings.summary_chunk_chars
        self.relevance_timeout = settings.relevance_timeout_seconds

    def prune(self, exchange_texts: Sequence[str], previous: Summary) -> Pruning:
        """Noise among the exchanges and the entries of `previous` they supersede.

        Exchanges go in batches of at most `summary_chunk_chars`; a batch whose
        check fails prunes nothing.
        """
        pruning = Pruning(set(), set(), set())
        system = llm.fill(llm.prompt(NOISE_PROMPT), summary=rolling.listing(previous))
        for batch in _batches(exchange_texts, self.batch_chars):
            user = "\n\n".join(f"E{index + 1}:\n{exchange_texts[index]}" for index in batch)
            try:
                verdict = _read(self.model.complete(system, user), _NoiseVerdict)
            except (MemsvcError, UnreadableVerdict) as exc:
                log.warning("noise check failed, keeping every exchange of the batch",
                            extra={"reason": getattr(exc, "reason", "UNREADABLE_VERDICT"), "exchanges": len(batch)})
                continue
            for item in verdict.noise:
                index, confidence = _number(item.exchange), _confidence(item.confidence)
                if index is not None and index - 1 in batch and confidence >= NOISE_CONFIDENCE:
                    pruning.noise.add(index - 1)
            pruning.superseded_key_decisions |= _numbers(verdict.superseded_key_decisions)
            pruning.superseded_past_discussions |= _numbers(verdict.superseded_past_discussions)
        return pruning

    @tracing.traced("summary.relevance")
    def relevant(self, whole: Summary, window: Sequence[Record], request_text: str) -> Summary:
        """The entries of `whole` that the request needs; `whole` itself when the check fails.

        Past discussions last discussed before the oldest window message are
        left out first (the reference does so).
        """
        candidates = whole
        if window:
            oldest = datetime.fromtimestamp(window[0].send_at / NANOS_PER_SECOND)
            candidates = rolling.discussed_since(whole, oldest)
        if candidates.is_empty():
            return candidates
        user = (f"Entries:\n{rolling.listing(candidates)}\n\n"
                f"Request:\n{request_text[:MAX_REQUEST_CHARS]}")
        try:
            reply = self.model.complete(llm.prompt(RELEVANCE_PROMPT), user, timeout=self.relevance_timeout,
                                        max_retries=0)
            verdict = _read(reply, _RelevanceVerdict)
        except (MemsvcError, UnreadableVerdict) as exc:
            log.warning("relevance check failed, keeping every entry",
                        extra={"reason": getattr(exc, "reason", "UNREADABLE_VERDICT")})
            return whole
        current = verdict.current_discussion
        return rolling.only(candidates, _numbers(verdict.key_decisions), _numbers(verdict.past_discussions),
                            current is True or (isinstance(current, str) and current.lower() == "true"))


def _batches(texts: Sequence[str], limit: int) -> list[list[int]]:
    batches: list[list[int]] = []
    size = limit
    for index, text in enumerate(texts):
        if size + len(text) > limit:
            batches.append([])
            size = 0
        batches[-1].append(index)
        size += len(text)
    return batches


def _read(reply: str, kind: type[Verdict]) -> Verdict:
    """The JSON object of a verdict, fenced or not, with text around it."""
    start = reply.find("{")
    if start < 0:
        raise UnreadableVerdict("no JSON object in the reply")
    try:
        data, _ = json.JSONDecoder().raw_decode(reply[start:])
        return msgspec.convert(data, kind, strict=False)
    except (ValueError, msgspec.ValidationError) as exc:
        raise UnreadableVerdict(str(exc)) from exc


def _number(value: int | str) -> int | None:
    """1 from 1, "1", "E1", "K1" or "P1"."""
    if isinstance(value, int):
        return value
    found = _NUMBER.search(value)
    return int(found.group()) if found else None


def _numbers(values: list[int | str]) -> set[int]:
    return {number for value in values if (number := _number(value)) is not None}


def _confidence(value: float | str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
