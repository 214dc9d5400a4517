"""What a valid error-memory request is: the lesson to record, its limits,
the checks with their stable reasons, keyword clean-up, result limits and
ListErrors page tokens.

Must never touch storage or the clock: store.py owns those. Every rejection
is an InvalidArgument raised before anything is stored.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

import msgspec

from memsvc.core.errors import InvalidArgument
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.lessons.model import ERROR_TYPE_PREFIX, OUTCOMES, NewLesson

MAX_TOOL_NAME_CHARS = 128
MAX_TEXT_BYTES = 16 * 1024
"Largest symptom, cause or action."
MAX_ERROR_TEXT_BYTES = 64 * 1024
"Largest error text a lookup may carry."
MAX_KEYWORDS = 32
MAX_KEYWORD_CHARS = 128
MAX_QUERY_CHARS = 1024
DEFAULT_LOOKUP_LIMIT, MAX_LOOKUP_LIMIT = 3, 32
DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT = 8, 32
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 500


def check_new(new: NewLesson) -> NewLesson:
    """The lesson with its text trimmed and its keywords cleaned; raises on anything invalid."""
    tool_name = check_tool_name(new.tool_name)
    if not new.outcome:
        raise InvalidArgument("outcome is required: resolved, failed or abandoned", reason=Reason.OUTCOME_REQUIRED)
    if new.outcome not in OUTCOMES:
        raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}", reason=Reason.INVALID_OUTCOME)
    symptom = check_text("symptom", new.symptom, Reason.SYMPTOM_REQUIRED)
    check_size("cause", new.cause, MAX_TEXT_BYTES)
    if new.outcome == "resolved":
        check_text("action", new.action, Reason.ACTION_REQUIRED)
    else:
        check_size("action", new.action, MAX_TEXT_BYTES)
    if new.session_id:
        check_session_id(new.session_id)
    if len(new.keywords) > MAX_KEYWORDS:
        raise InvalidArgument(f"{len(new.keywords)} keywords; at most {MAX_KEYWORDS}", reason=Reason.TOO_MANY_KEYWORDS)
    for keyword in new.keywords:
        if len(keyword) > MAX_KEYWORD_CHARS:
            raise InvalidArgument(f"a keyword is longer than {MAX_KEYWORD_CHARS} characters",
                                  reason=Reason.KEYWORD_TOO_LONG)
    return msgspec.structs.replace(new, tool_name=tool_name, symptom=symptom, cause=new.cause.strip(),
                                   action=new.action.strip(), keywords=user_keywords(new.keywords))


def check_tool_name(tool_name: str) -> str:
    tool_name = tool_name.strip()
    if not tool_name:
        raise InvalidArgument("tool_name is required", reason=Reason.TOOL_NAME_REQUIRED)
    if len(tool_name) > MAX_TOOL_NAME_CHARS or any(unicodedata.category(c)[0] == "C" for c in tool_name):
        raise InvalidArgument(f"tool_name must be 1-{MAX_TOOL_NAME_CHARS} printable characters",
                              reason=Reason.INVALID_TOOL_NAME)
    return tool_name


def check_text(field: str, text: str, required: Reason) -> str:
    if not text.strip():
        raise InvalidArgument(f"{field} is required and must not be blank", reason=required)
    check_size(field, text, MAX_TEXT_BYTES)
    return text.strip()


def check_size(field: str, text: str, limit: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; at most {limit}", reason=Reason.FIELD_TOO_LARGE,
                              metadata={"field": field})


def check_id(lesson_id: str) -> None:
    if not lesson_id:
        raise InvalidArgument("id is required", reason=Reason.ERROR_ID_REQUIRED)
    if len(lesson_id) > 64:
        raise InvalidArgument("id is not an error record id", reason=Reason.INVALID_ERROR_ID)


def user_keywords(keywords: list[str]) -> list[str]:
    """Trimmed, blank and automatic ones dropped, case-insensitive duplicates dropped, order kept."""
    kept: dict[str, str] = {}
    for keyword in keywords:
        keyword = keyword.strip()
        if keyword and not keyword.casefold().startswith(ERROR_TYPE_PREFIX):
            kept.setdefault(keyword.casefold(), keyword)
    return list(kept.values())[:MAX_KEYWORDS]


def clamp(value: int, default: int, most: int) -> int:
    return min(value or default, most)


def encode_token(created_at: int, lesson_id: str) -> str:
    """A ListErrors page token: where the next page starts (newest first)."""
    return base64.urlsafe_b64encode(f"{created_at}.{lesson_id}".encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    try:
        created_at, last_id = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(".")
        if not re.fullmatch(r"[0-9a-f]{32}", last_id) or not 0 <= int(created_at) < 2**63:
            raise ValueError(last_id)  # a time no lesson has: the stores hold 64-bit integers
        return int(created_at), last_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument("page_token is not one this server issued; start again with an empty token",
                              reason=Reason.INVALID_PAGE_TOKEN) from None
