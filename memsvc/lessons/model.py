"""What a lesson of error memory is: the records the tier stores and returns.

Owns the shapes (a lesson, a new lesson as asked, the outcome of recording,
the related lessons of a lookup), the outcomes a request may name and the
automatic `error_type:` keyword. Must never validate, match or store.
"""

from __future__ import annotations

import msgspec

OUTCOMES = ("resolved", "failed", "abandoned")
ERROR_TYPE_PREFIX = "error_type:"


class NewLesson(msgspec.Struct, kw_only=True):
    tool_name: str
    symptom: str
    outcome: str
    "resolved, failed or abandoned; empty when the caller did not say."
    action: str = ""
    cause: str = ""
    keywords: list[str] = msgspec.field(default_factory=list)
    session_id: str = ""


class Lesson(msgspec.Struct, kw_only=True):
    id: str
    tool_name: str
    keywords: list[str]
    "The caller's keywords and the automatic error_type:<class>."
    symptom: str
    cause: str
    action: str
    session_id: str
    created_at: int
    last_hit: int
    expires_at: int
    "All three UTC Unix nanoseconds."
    hit_count: int

    @property
    def error_type(self) -> str:
        return next((k[len(ERROR_TYPE_PREFIX):] for k in self.keywords if k.startswith(ERROR_TYPE_PREFIX)), "other")


class Recorded(msgspec.Struct):
    lesson: Lesson | None
    stored: bool
    refreshed: bool
    detail: str


class Related(msgspec.Struct):
    lessons: list[Lesson]
    related_errors: str
