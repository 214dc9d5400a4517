"""summary.json: the rolling summary's shape, validation, storage and the
turn context that carries it to the model.

Owns reading and writing the file (unknown keys kept; a file too large or
nested too deep to be a summary is unreadable, whoever wrote it), the rules a summary
must follow (at most 8 `Do: `/`Don't: ` key decisions, older markers
rewritten, at most 8 past discussions), parsing a model's reply into a
summary, the numbered listing a decision model judges and picking entries
by number, and rendering the `Prior summary` block. Must never call an LLM:
generating summaries is summarizer.py's job, judging them decisions.py's.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from memsvc.core import durable

log = logging.getLogger(__name__)

SUMMARY_KEYS = ("key_decisions", "past_discussions", "current_discussion")
MAX_KEY_DECISIONS = 8
MAX_PAST_DISCUSSIONS = 8
DO, DONT = "Do: ", "Don't: "
LAST_DISCUSSED_FORMAT = "%Y-%m-%d %H:%M"
MAX_SUMMARY_BYTES = 1 << 20
"summary.json past this is not a summary (a model's is a few KB): unreadable, as a damaged one is."
MAX_DEPTH = 16
"Objects and lists nested deeper than this in summary.json (its own shape is 3 deep) make it unreadable."
TURN_CONTEXT_PREFIX = "Prior summary:"
"How the turn context's text starts: FitContext knows the message by it."
# Markers of earlier prompt versions (Chinese, Japanese; full- or half-width
# colon) and loose English spellings, rewritten to the English marker. The
# negative forms come first: `不要：` also starts like `要：` would after `不`.
_MARKERS = re.compile(
    r"^\s*(?:(?P<dont>不要|しない|don['\u2019]?t|do\s+not)|(?P<do>要|する|do))\s*[:：]\s*", re.IGNORECASE)
_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAGGED = re.compile(r"<summary>(.*?)</summary>", re.DOTALL | re.IGNORECASE)


class PastDiscussion(msgspec.Struct, kw_only=True):
    topic: str = ""
    description: str = ""
    direction: str = ""
    last_discussed: str = ""
    "YYYY-MM-DD HH:mm, local time."


class CurrentDiscussion(msgspec.Struct, kw_only=True):
    topic: str = ""
    description: str = ""
    perspectives: str | list[str] = ""
    direction: str = ""


class Summary(msgspec.Struct, kw_only=True):
    key_decisions: list[str] = []
    past_discussions: list[PastDiscussion] = []
    current_discussion: CurrentDiscussion | None = None
    extra: dict[str, Any] = {}
    "Keys this version does not know, kept as they were."

    def is_empty(self) -> bool:
        return not (self.key_decisions or self.past_discussions or self.current_discussion)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data["key_decisions"] = list(self.key_decisions)
        data["past_discussions"] = [msgspec.structs.asdict(item) for item in self.past_discussions]
        if self.current_discussion is not None:
            data["current_discussion"] = msgspec.structs.asdict(self.current_discussion)
        return data


class InvalidSummary(ValueError):
    pass


def from_dict(data: Any) -> Summary:
    """A summary from decoded JSON; valid when at least 2 of its 3 keys are present."""
    if not isinstance(data, dict):
        raise InvalidSummary("a summary must be a JSON object")
    present = [key for key in SUMMARY_KEYS if key in data]
    if len(present) < 2:
        raise InvalidSummary(f"a summary needs at least 2 of {', '.join(SUMMARY_KEYS)}; found {present or 'none'}")
    known = {key: data[key] for key in SUMMARY_KEYS if key in data and data[key] is not None}
    try:
        summary = msgspec.convert(known, Summary, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidSummary(f"summary has the wrong shape: {exc}") from exc
    summary.extra = {key: value for key, value in data.items() if key not in SUMMARY_KEYS}
    return summary


def decode(data: bytes) -> Summary:
    """summary.json's bytes as a summary, wherever they come from (the file, an import); InvalidSummary
    when they are too large, nested too deep, not JSON or not a summary's shape."""
    if len(data) > MAX_SUMMARY_BYTES:
        raise InvalidSummary(f"a summary is at most {MAX_SUMMARY_BYTES} bytes; this one is {len(data)}")
    try:
        decoded = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested past the decoder's own limit
        raise InvalidSummary(f"summary.json is not JSON a summary can hold ({type(exc).__name__})") from None
    if _deeper_than(decoded, MAX_DEPTH):  # each later encode of it would recurse as deep
        raise InvalidSummary(f"a summary nests objects and lists at most {MAX_DEPTH} deep")
    return from_dict(decoded)


def _deeper_than(value: Any, limit: int) -> bool:
    level: list[Any] = [value]
    for _ in range(limit):
        level = [child for item in level if isinstance(item, dict | list)
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return False
    return any(isinstance(item, dict | list) for item in level)


def encode(summary: Summary) -> bytes:
    return msgspec.json.format(msgspec.json.encode(summary.to_dict()), indent=2)


def load(path: Path) -> Summary | None:
    """The stored summary, or None when there is none or it cannot be read.

    An unreadable file is left in place (and logged) so a person can look at it.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode(data)
    except InvalidSummary as exc:
        log.warning("unreadable summary.json left in place", extra={"path": str(path), "error": str(exc)})
        return None


def save(path: Path, summary: Summary) -> None:
    durable.atomic_write(path, encode(summary))


def turn_context(summary: Summary) -> str:
    """The text of the one user message that sits after the window."""
    block = msgspec.json.format(msgspec.json.encode(summary.to_dict()), indent=2).decode()
    return f"{TURN_CONTEXT_PREFIX}\n```json\n{block}\n```"


# -- rules -------------------------------------------------------------------

def rule(entry: str) -> str | None:
    """A key decision with its English `Do: `/`Don't: ` marker; None when it says nothing.

    An entry with no marker reads as an instruction as it stands ("Never
    deploy on Fridays"), so it gets `Do: `.
    """
    match = _MARKERS.match(entry)
    text = (entry[match.end():] if match else entry).strip()
    if not text:
        return None
    return (DONT if match and match.group("dont") else DO) + text


def within_rules(summary: Summary) -> Summary:
    """`summary` following the rules: markers rewritten, limits kept.

    Past the limits, the first key decisions and the most recently discussed
    past discussions are kept.
    """
    decisions: list[str] = []
    for entry in summary.key_decisions:
        fixed = rule(entry)
        if fixed is not None and fixed not in decisions:
            decisions.append(fixed)
    past = summary.past_discussions
    if len(past) > MAX_PAST_DISCUSSIONS:
        newest = sorted(range(len(past)), key=lambda i: past[i].last_discussed, reverse=True)
        keep = set(newest[:MAX_PAST_DISCUSSIONS])
        past = [item for index, item in enumerate(past) if index in keep]
    return msgspec.structs.replace(summary, key_decisions=decisions[:MAX_KEY_DECISIONS], past_discussions=list(past))


def parse_reply(text: str) -> Summary:
    """The summary in a model's reply: a fenced json block, a `<summary>` tag,
    or the text from the first `{`, whichever valid one comes first."""
    candidates = [match.group(1) for match in _FENCED.finditer(text)]
    candidates += [_unfenced(match.group(1)) for match in _TAGGED.finditer(text)]
    start = text.find("{")
    if start >= 0:
        candidates.append(text[start:])
    problem = "the reply holds no JSON object"
    for candidate in candidates:
        try:
            data, _ = json.JSONDecoder().raw_decode(candidate.strip())
            return from_dict(data)
        except ValueError as exc:  # InvalidSummary is a ValueError too
            problem = str(exc)
    raise InvalidSummary(f"no valid summary in the reply: {problem}")


def _unfenced(text: str) -> str:
    fenced = _FENCED.search(text)
    return fenced.group(1) if fenced else text


# -- entries, by number --------------------------------------------------------

def listing(summary: Summary) -> str:
    """Each entry on its own line, numbered K1.., P1.. and C, for a model to judge."""
    lines = [f"K{number}. {entry}" for number, entry in enumerate(summary.key_decisions, start=1)]
    for number, item in enumerate(summary.past_discussions, start=1):
        lines.append(f"P{number}. {item.topic}: {item.description} (direction: {item.direction}; "
                     f"last discussed {item.last_discussed})")
    current = summary.current_discussion
    if current is not None:
        lines.append(f"C. {current.topic}: {current.description} (direction: {current.direction})")
    return "\n".join(lines) or "(empty)"


def without(summary: Summary, key_decisions: Iterable[int], past_discussions: Iterable[int]) -> Summary:
    """`summary` less the numbered (1-based) entries."""
    drop_k, drop_p = set(key_decisions), set(past_discussions)
    return msgspec.structs.replace(
        summary,
        key_decisions=[e for n, e in enumerate(summary.key_decisions, start=1) if n not in drop_k],
        past_discussions=[e for n, e in enumerate(summary.past_discussions, start=1) if n not in drop_p])


def only(summary: Summary, key_decisions: Iterable[int], past_discussions: Iterable[int],
         current_discussion: bool) -> Summary:
    """`summary` keeping just the numbered (1-based) entries."""
    keep_k, keep_p = set(key_decisions), set(past_discussions)
    return msgspec.structs.replace(
        summary,
        key_decisions=[e for n, e in enumerate(summary.key_decisions, start=1) if n in keep_k],
        past_discussions=[e for n, e in enumerate(summary.past_discussions, start=1) if n in keep_p],
        current_discussion=summary.current_discussion if current_discussion else None)


def discussed_since(summary: Summary, oldest: datetime) -> Summary:
    """`summary` without the past discussions last discussed before `oldest` (local time).

    An entry whose `last_discussed` cannot be read is kept.
    """
    floor = oldest.replace(second=0, microsecond=0, tzinfo=None)
    kept = []
    for item in summary.past_discussions:
        try:
            when = datetime.strptime(item.last_discussed.strip(), LAST_DISCUSSED_FORMAT)
        except ValueError:
            kept.append(item)
            continue
        if when >= floor:
            kept.append(item)
    return msgspec.structs.replace(summary, past_discussions=kept)
