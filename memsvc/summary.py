"""summary.json: the rolling summary's shape, validation, storage and the
turn context that carries it to the model.

Owns reading and writing the file (unknown keys kept) and rendering the
`Prior summary` block. Must never call an LLM: generating summaries is
summarizer.py's job.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec

from . import durable

log = logging.getLogger(__name__)

SUMMARY_KEYS = ("key_decisions", "past_discussions", "current_discussion")
MAX_KEY_DECISIONS = 8
MAX_PAST_DISCUSSIONS = 8


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
        return from_dict(msgspec.json.decode(data))
    except (msgspec.DecodeError, InvalidSummary) as exc:
        log.warning("unreadable summary.json left in place", extra={"path": str(path), "error": str(exc)})
        return None


def save(path: Path, summary: Summary) -> None:
    durable.atomic_write(path, encode(summary))


def turn_context(summary: Summary) -> str:
    """The text of the one user message that sits after the window."""
    block = msgspec.json.format(msgspec.json.encode(summary.to_dict()), indent=2).decode()
    return f"Prior summary:\n```json\n{block}\n```"
