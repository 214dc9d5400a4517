"""Proto <-> domain conversions, shared by the servicers.

Must never hold logic beyond mapping fields and enums; unknown enum values,
and embeddings too long to copy, are rejected here because only the wire
can carry them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import ROLES, Record
from memsvc.lifecycle.clearing import Deleted
from memsvc.search.query import Explanation, Hit, Query
from memsvc.summary.rolling import Summary, encode
from memsvc.summary.runs import Outcome, Run, Trigger
from memsvc.window.incoming import NewMessage
from memsvc.window.lister import SessionInfo
from memsvc_client.v1 import memory_pb2 as pb

Name = TypeVar("Name", bound=str)

ROLE_VALUES = {name: pb.Role.Value(f"ROLE_{name.upper()}") for name in ROLES}
ROLE_NAMES = {value: name for name, value in ROLE_VALUES.items()}
MAX_EMBEDDING_VALUES = 65_536
"Most values an embedding may carry off the wire (no embedder comes near): a longer one is refused before it is copied."


def floats(values: Sequence[float], field: str) -> list[float]:
    """An embedding as a list, refused first if it is longer than any index could hold: copied into
    Python floats, a 2-million-value vector costs ~60 MB per request."""
    if len(values) > MAX_EMBEDDING_VALUES:
        raise InvalidArgument(f"{field} has {len(values)} values; an embedding has at most {MAX_EMBEDDING_VALUES}",
                              reason=Reason.EMBEDDING_TOO_LARGE)
    return list(values)


def new_message(message: pb.Message) -> NewMessage:
    """The domain checks the role: an unknown or unset one arrives as ""."""
    return NewMessage(role=ROLE_NAMES.get(message.role, ""), content=message.content, sender=message.sender,
                      send_at=message.send_at_unix_nano, embedding=floats(message.embedding, "embedding"),
                      payload=message.payload_json)


def message(record: Record, with_content: bool = True) -> pb.Message:
    """`with_content=False`: what Append acknowledges of a stored message, all but its content and payload."""
    return pb.Message(id=record.id, role=pb.Role.Name(ROLE_VALUES.get(record.role, pb.ROLE_UNSPECIFIED)),
                      content=record.content if with_content else "", sender=record.sender,
                      send_at_unix_nano=record.send_at, payload_json=record.payload if with_content else "")


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


SUMMARY_TRIGGERS: dict[Trigger, pb.SummaryTrigger] = {
    "job": pb.SUMMARY_TRIGGER_JOB, "summarize": pb.SUMMARY_TRIGGER_SUMMARIZE,
    "fit_context": pb.SUMMARY_TRIGGER_FIT_CONTEXT}
SUMMARY_OUTCOMES: dict[Outcome, pb.SummaryOutcome] = {
    "summarized": pb.SUMMARY_OUTCOME_SUMMARIZED, "nothing_new": pb.SUMMARY_OUTCOME_NOTHING_NEW,
    "failed": pb.SUMMARY_OUTCOME_FAILED}


def summary_run(run: Run) -> pb.SummaryRun:
    return pb.SummaryRun(trigger=SUMMARY_TRIGGERS[run.trigger], started_at_unix_nano=run.started_at,
                         finished_at_unix_nano=run.finished_at, outcome=SUMMARY_OUTCOMES[run.outcome],
                         messages=run.messages, reason=run.reason, message=run.message)


def run_of(value: pb.SummaryRun, field: str) -> Run:
    """A run from the wire (an import's head); unknown or unset enums are refused."""
    triggers = {number: name for name, number in SUMMARY_TRIGGERS.items()}
    outcomes = {number: name for name, number in SUMMARY_OUTCOMES.items()}
    return Run(trigger=enum_name(value.trigger, triggers, f"{field}.trigger"),
               started_at=value.started_at_unix_nano, finished_at=value.finished_at_unix_nano,
               outcome=enum_name(value.outcome, outcomes, f"{field}.outcome"),
               messages=value.messages, reason=value.reason, message=value.message)


MATCHES = {pb.MATCH_SEMANTIC: "semantic", pb.MATCH_KEYWORD: "keyword",
           pb.MATCH_HYBRID: "hybrid"}
TIME_RANGES = {pb.TIME_RANGE_UNSPECIFIED: "all", pb.TIME_RANGE_ALL: "all", pb.TIME_RANGE_DAY: "1d",
               pb.TIME_RANGE_WEEK: "7d", pb.TIME_RANGE_MONTH: "1m", pb.TIME_RANGE_YEAR: "1y"}
SOURCES = {"recent": pb.SOURCE_RECENT, "archive": pb.SOURCE_ARCHIVE}
TIERS = {"window": pb.SOURCE_WINDOW, "recent": pb.SOURCE_RECENT, "archive": pb.SOURCE_ARCHIVE}
RESET_MODES = {pb.RESET_MODE_UNSPECIFIED: "summary", pb.RESET_MODE_SUMMARY: "summary", pb.RESET_MODE_ALL: "all"}


def enum_name(value: int, names: Mapping[Any, Name], field: str) -> Name:
    """The domain name of an enum value; proto3 keeps numbers this server does not know."""
    if value not in names:
        raise InvalidArgument(f"{field} has unknown value {value}", reason=Reason.INVALID_ENUM)
    return names[value]


def query(request: pb.SearchRequest) -> Query:
    return Query(session_id=request.session_id, text=request.query,
                 match=None if request.match == pb.MATCH_UNSPECIFIED  # the domain's default: Query.mode
                 else enum_name(request.match, MATCHES, "match"),  # type: ignore[arg-type]
                 limit=request.limit, time_range=enum_name(request.time_range, TIME_RANGES, "time_range"),
                 since=request.since_unix_nano, until=request.until_unix_nano,
                 include_window=request.include_window, vector=floats(request.query_embedding, "query_embedding"),
                 require_all_words=request.require_all_words, with_context=request.with_context,
                 omit_payloads=request.omit_payloads, explain=request.explain)


def hit(value: Hit) -> pb.SearchHit:
    return pb.SearchHit(message=message(value.record), source=SOURCES[value.source], score=value.score,
                        is_context=value.is_context, run=value.run,
                        explanation=None if value.explanation is None else explanation(value.explanation))


def explanation(value: Explanation) -> pb.HitExplanation:
    return pb.HitExplanation(keyword_rank=value.keyword_rank, keyword_score=value.keyword_score,
                             semantic_rank=value.semantic_rank, semantic_similarity=value.semantic_similarity,
                             fused_score=value.fused_score, reranked=value.rerank_score is not None,
                             rerank_score=value.rerank_score or 0.0, tier=TIERS[value.tier])


def deleted(value: Deleted) -> pb.Deleted:
    return pb.Deleted(history_messages=value.history_messages, archived_messages=value.archived_messages,
                      vectors=value.vectors, summary=value.summary)


def session_info(info: SessionInfo) -> pb.SessionInfo:
    return pb.SessionInfo(session_id=info.session_id, message_count=info.message_count,
                          history_bytes=info.history_bytes, last_append_unix_nano=info.last_append,
                          has_summary=info.has_summary)
