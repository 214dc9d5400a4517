"""What a lesson backend is: the `LessonStore` protocol that sqlite.py and
postgres.py implement, the rows a lookup scores, and the folded text both
keep for SearchErrors to narrow its scan.

A backend only stores and queries. It is handed `now` by every call and
never reads the clock, never validates, matches, scores or embeds (the
service, service.py, does), never returns an expired lesson and never logs
lesson text. Each call is atomic on its own, however many servers share the
store: a refresh never goes back in time and never loses a hit, and one
symptom of one tool is one lesson.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import msgspec

from memsvc.lessons.matching import fold
from memsvc.lessons.model import Lesson

SymptomKey = tuple[str, str]
"(casefolded tool name, normalized symptom): a repeated lesson has the same key."
Merge = Callable[[Lesson | None], Lesson]
"Given the live lesson of a key (None when there is none), the lesson to write in its place."


class StoredLesson(msgspec.Struct):
    """A lesson with the vector stored for it, as a lookup scores it."""

    lesson: Lesson
    vector: bytes | None
    "float32 values; None when the embedder failed or there was none."
    vector_model: str
    "The embedder that made `vector` (its name); a vector of another one is stale."


class Renewal(msgspec.Struct):
    """A lesson's hit fields after a refresh."""

    last_hit: int
    expires_at: int
    hit_count: int


class LessonStore(Protocol):
    def upsert(self, key: SymptomKey, merge: Merge, vector: bytes | None, vector_model: str,
               now: int) -> tuple[Lesson, bool]:
        """Write `merge(the live lesson of key, or None)` with its vector, in one transaction
        holding that key, so two servers recording one symptom at once make one lesson; an
        expired lesson of the key is replaced, and expired lessons may be purged meanwhile.
        Returns the lesson written and whether it replaced a live one."""
        ...

    def of_tool(self, tool_key: str, now: int) -> list[StoredLesson]:
        """Every live lesson of a tool (by casefolded name), with its vector."""
        ...

    def refresh(self, lesson_ids: Sequence[str], now: int, expires_at: int) -> dict[str, Renewal]:
        """Count a hit on each live lesson of `lesson_ids`: hit_count + 1, last_hit and expiry
        moved forward to `now` and `expires_at` (never back). Lessons gone meanwhile are left out."""
        ...

    def set_vectors(self, vectors: Mapping[str, bytes], vector_model: str) -> None:
        """Keep vectors made by `vector_model` for lessons stored without a current one."""
        ...

    def containing(self, folded: str, now: int) -> list[Lesson]:
        """Live lessons whose `haystack` may contain `folded`: at least those that do."""
        ...

    def page(self, now: int, tool_key: str, after: tuple[int, str] | None, limit: int) -> list[Lesson]:
        """Up to `limit` live lessons (of one tool when `tool_key` is set), newest first by
        (created_at, id), starting below `after`."""
        ...

    def set_action(self, lesson_id: str, action: str, now: int) -> Lesson | None:
        """Rewrite a live lesson's action, nothing else; None when there is none with that id."""
        ...

    def delete(self, lesson_id: str, now: int) -> Lesson | None:
        """Delete a live lesson; returns it, or None when there is none with that id."""
        ...

    def purge(self, now: int) -> int:
        """Delete the lessons expired by `now`, one purge at a time; returns how many."""
        ...

    def check(self) -> None:
        """Raise the MemsvcError a call would meet now (a database out of reach), if any."""
        ...

    def close(self) -> None: ...


def haystack(lesson: Lesson) -> str:
    """Every searchable field, folded, one per line (folding leaves no newline inside one)."""
    return "\n".join(fold(text) for text in (lesson.tool_name, " ".join(lesson.keywords), lesson.symptom,
                                               lesson.cause, lesson.action))
