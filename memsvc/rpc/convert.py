"""Proto <-> domain conversions, shared by the servicers.

Must never hold logic beyond mapping fields and enums; unknown enum values
are rejected here because only the wire can carry them.
"""

from __future__ import annotations

from ..errors import InvalidArgument
from ..history import Record
from ..lifecycle import Deleted
from ..search import Hit, Query
from ..sessions import NewMessage
from ..summary import Summary, encode
from ..v1 import memory_pb2 as pb

ROLE_NAMES = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant"}
ROLE_VALUES = {name: value for value, name in ROLE_NAMES.items()}


def new_message(message: pb.Message, index: int) -> NewMessage:
    if message.role not in ROLE_NAMES:
        raise InvalidArgument(
            f"messages[{index}].role is {message.role}; use ROLE_USER or ROLE_ASSISTANT", reason="INVALID_ROLE")
    return NewMessage(role=ROLE_NAMES[message.role], content=message.content, sender=message.sender,
                      send_at=message.send_at_unix_nano, embedding=list(message.embedding))


def message(record: Record) -> pb.Message:
    return pb.Message(id=record.id, role=ROLE_VALUES.get(record.role, pb.ROLE_UNSPECIFIED), content=record.content,
                      sender=record.sender, send_at_unix_nano=record.send_at)


def summary(value: Summary) -> pb.Summary:
    current = value.current_discussion
    return pb.Summary(
        key_decisions=value.key_decisions,
        past_discussions=[pb.PastDiscussion(topic=item.topic, description=item.description,
                                            direction=item.direction, last_discussed=item.last_discussed)
                          for item in value.past_discussions],
        current_discussion=None if current is None else pb.CurrentDiscussion(
            topic=current.topic, description=current.description, direction=current.direction,
            perspectives=current.perspectives if isinstance(current.perspectives, str)
            else "\n".join(current.perspectives)),
        json=encode(value).decode(),
    )


MATCHES = {pb.MATCH_UNSPECIFIED: "semantic", pb.MATCH_SEMANTIC: "semantic", pb.MATCH_KEYWORD: "keyword",
           pb.MATCH_HYBRID: "hybrid"}
TIME_RANGES = {pb.TIME_RANGE_UNSPECIFIED: "all", pb.TIME_RANGE_ALL: "all", pb.TIME_RANGE_DAY: "1d",
               pb.TIME_RANGE_WEEK: "7d", pb.TIME_RANGE_MONTH: "1m", pb.TIME_RANGE_YEAR: "1y"}
SOURCES = {"recent": pb.SOURCE_RECENT, "archive": pb.SOURCE_ARCHIVE}
RESET_MODES = {pb.RESET_MODE_UNSPECIFIED: "summary", pb.RESET_MODE_SUMMARY: "summary", pb.RESET_MODE_ALL: "all"}


def enum_name(value: int, names: dict[int, str], field: str) -> str:
    """The domain name of an enum value; proto3 keeps numbers this server does not know."""
    if value not in names:
        raise InvalidArgument(f"{field} has unknown value {value}", reason="INVALID_ENUM")
    return names[value]


def query(request: pb.SearchRequest) -> Query:
    return Query(session_id=request.session_id, text=request.query,
                 match=enum_name(request.match, MATCHES, "match"),  # type: ignore[arg-type]
                 limit=request.limit, time_range=enum_name(request.time_range, TIME_RANGES, "time_range"),
                 since=request.since_unix_nano, until=request.until_unix_nano,
                 include_window=request.include_window, vector=list(request.query_embedding))


def hit(value: Hit) -> pb.SearchHit:
    return pb.SearchHit(message=message(value.record), source=SOURCES[value.source], score=value.score,
                        is_context=value.is_context, run=value.run)


def deleted(value: Deleted) -> pb.Deleted:
    return pb.Deleted(history_messages=value.history_messages, archived_messages=value.archived_messages,
                      vectors=value.vectors, summary=value.summary)
