from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_TOOL: _ClassVar[Role]

class Match(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MATCH_UNSPECIFIED: _ClassVar[Match]
    MATCH_SEMANTIC: _ClassVar[Match]
    MATCH_KEYWORD: _ClassVar[Match]
    MATCH_HYBRID: _ClassVar[Match]

class TimeRange(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIME_RANGE_UNSPECIFIED: _ClassVar[TimeRange]
    TIME_RANGE_ALL: _ClassVar[TimeRange]
    TIME_RANGE_DAY: _ClassVar[TimeRange]
    TIME_RANGE_WEEK: _ClassVar[TimeRange]
    TIME_RANGE_MONTH: _ClassVar[TimeRange]
    TIME_RANGE_YEAR: _ClassVar[TimeRange]

class Source(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_UNSPECIFIED: _ClassVar[Source]
    SOURCE_RECENT: _ClassVar[Source]
    SOURCE_ARCHIVE: _ClassVar[Source]
    SOURCE_WINDOW: _ClassVar[Source]

class SummaryTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUMMARY_TRIGGER_UNSPECIFIED: _ClassVar[SummaryTrigger]
    SUMMARY_TRIGGER_JOB: _ClassVar[SummaryTrigger]
    SUMMARY_TRIGGER_SUMMARIZE: _ClassVar[SummaryTrigger]
    SUMMARY_TRIGGER_FIT_CONTEXT: _ClassVar[SummaryTrigger]

class SummaryOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUMMARY_OUTCOME_UNSPECIFIED: _ClassVar[SummaryOutcome]
    SUMMARY_OUTCOME_SUMMARIZED: _ClassVar[SummaryOutcome]
    SUMMARY_OUTCOME_NOTHING_NEW: _ClassVar[SummaryOutcome]
    SUMMARY_OUTCOME_FAILED: _ClassVar[SummaryOutcome]

class ResetMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESET_MODE_UNSPECIFIED: _ClassVar[ResetMode]
    RESET_MODE_SUMMARY: _ClassVar[ResetMode]
    RESET_MODE_ALL: _ClassVar[ResetMode]
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
MATCH_UNSPECIFIED: Match
MATCH_SEMANTIC: Match
MATCH_KEYWORD: Match
MATCH_HYBRID: Match
TIME_RANGE_UNSPECIFIED: TimeRange
TIME_RANGE_ALL: TimeRange
TIME_RANGE_DAY: TimeRange
TIME_RANGE_WEEK: TimeRange
TIME_RANGE_MONTH: TimeRange
TIME_RANGE_YEAR: TimeRange
SOURCE_UNSPECIFIED: Source
SOURCE_RECENT: Source
SOURCE_ARCHIVE: Source
SOURCE_WINDOW: Source
SUMMARY_TRIGGER_UNSPECIFIED: SummaryTrigger
SUMMARY_TRIGGER_JOB: SummaryTrigger
SUMMARY_TRIGGER_SUMMARIZE: SummaryTrigger
SUMMARY_TRIGGER_FIT_CONTEXT: SummaryTrigger
SUMMARY_OUTCOME_UNSPECIFIED: SummaryOutcome
SUMMARY_OUTCOME_SUMMARIZED: SummaryOutcome
SUMMARY_OUTCOME_NOTHING_NEW: SummaryOutcome
SUMMARY_OUTCOME_FAILED: SummaryOutcome
RESET_MODE_UNSPECIFIED: ResetMode
RESET_MODE_SUMMARY: ResetMode
RESET_MODE_ALL: ResetMode

class Message(_message.Message):
    __slots__ = ("id", "role", "content", "sender", "send_at_unix_nano", "embedding", "payload_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    SEND_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    id: int
    role: Role
    content: str
    sender: str
    send_at_unix_nano: int
    embedding: _containers.RepeatedScalarFieldContainer[float]
    payload_json: str
    def __init__(self, id: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., sender: _Optional[str] = ..., send_at_unix_nano: _Optional[int] = ..., embedding: _Optional[_Iterable[float]] = ..., payload_json: _Optional[str] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("session_id", "messages", "idempotency_key")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    idempotency_key: str
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("messages", "replayed")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    replayed: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("session_id", "request_text", "omit_payloads")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TEXT_FIELD_NUMBER: _ClassVar[int]
    OMIT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_text: str
    omit_payloads: bool
    def __init__(self, session_id: _Optional[str] = ..., request_text: _Optional[str] = ..., omit_payloads: _Optional[bool] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("window", "turn_context", "summary", "omitted_messages", "older_page_token")
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    TURN_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    OMITTED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OLDER_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    window: _containers.RepeatedCompositeFieldContainer[Message]
    turn_context: Message
    summary: Summary
    omitted_messages: int
    older_page_token: str
    def __init__(self, window: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., turn_context: _Optional[_Union[Message, _Mapping]] = ..., summary: _Optional[_Union[Summary, _Mapping]] = ..., omitted_messages: _Optional[int] = ..., older_page_token: _Optional[str] = ...) -> None: ...

class Summary(_message.Message):
    __slots__ = ("key_decisions", "past_discussions", "current_discussion", "json")
    KEY_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    PAST_DISCUSSIONS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_DISCUSSION_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    key_decisions: _containers.RepeatedScalarFieldContainer[str]
    past_discussions: _containers.RepeatedCompositeFieldContainer[PastDiscussion]
    current_discussion: CurrentDiscussion
    json: str
    def __init__(self, key_decisions: _Optional[_Iterable[str]] = ..., past_discussions: _Optional[_Iterable[_Union[PastDiscussion, _Mapping]]] = ..., current_discussion: _Optional[_Union[CurrentDiscussion, _Mapping]] = ..., json: _Optional[str] = ...) -> None: ...

class PastDiscussion(_message.Message):
    __slots__ = ("topic", "description", "direction", "last_discussed")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    LAST_DISCUSSED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    description: str
    direction: str
    last_discussed: str
    def __init__(self, topic: _Optional[str] = ..., description: _Optional[str] = ..., direction: _Optional[str] = ..., last_discussed: _Optional[str] = ...) -> None: ...

class CurrentDiscussion(_message.Message):
    __slots__ = ("topic", "description", "perspectives", "direction")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PERSPECTIVES_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    description: str
    perspectives: str
    direction: str
    def __init__(self, topic: _Optional[str] = ..., description: _Optional[str] = ..., perspectives: _Optional[str] = ..., direction: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("session_id", "query", "match", "limit", "time_range", "since_unix_nano", "until_unix_nano", "include_window", "query_embedding", "require_all_words", "with_context", "omit_payloads", "explain")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TIME_RANGE_FIELD_NUMBER: _ClassVar[int]
    SINCE_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    UNTIL_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_WINDOW_FIELD_NUMBER: _ClassVar[int]
    QUERY_EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_ALL_WORDS_FIELD_NUMBER: _ClassVar[int]
    WITH_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    OMIT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    query: str
    match: Match
    limit: int
    time_range: TimeRange
    since_unix_nano: int
    until_unix_nano: int
    include_window: bool
    query_embedding: _containers.RepeatedScalarFieldContainer[float]
    require_all_words: bool
    with_context: bool
    omit_payloads: bool
    explain: bool
    def __init__(self, session_id: _Optional[str] = ..., query: _Optional[str] = ..., match: _Optional[_Union[Match, str]] = ..., limit: _Optional[int] = ..., time_range: _Optional[_Union[TimeRange, str]] = ..., since_unix_nano: _Optional[int] = ..., until_unix_nano: _Optional[int] = ..., include_window: _Optional[bool] = ..., query_embedding: _Optional[_Iterable[float]] = ..., require_all_words: _Optional[bool] = ..., with_context: _Optional[bool] = ..., omit_payloads: _Optional[bool] = ..., explain: _Optional[bool] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "unsearched", "omitted_hits")
    HITS_FIELD_NUMBER: _ClassVar[int]
    UNSEARCHED_FIELD_NUMBER: _ClassVar[int]
    OMITTED_HITS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    unsearched: int
    omitted_hits: int
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., unsearched: _Optional[int] = ..., omitted_hits: _Optional[int] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("message", "source", "score", "is_context", "run", "explanation")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    IS_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    message: Message
    source: Source
    score: float
    is_context: bool
    run: int
    explanation: HitExplanation
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., source: _Optional[_Union[Source, str]] = ..., score: _Optional[float] = ..., is_context: _Optional[bool] = ..., run: _Optional[int] = ..., explanation: _Optional[_Union[HitExplanation, _Mapping]] = ...) -> None: ...

class HitExplanation(_message.Message):
    __slots__ = ("keyword_rank", "keyword_score", "semantic_rank", "semantic_similarity", "fused_score", "reranked", "rerank_score", "tier")
    KEYWORD_RANK_FIELD_NUMBER: _ClassVar[int]
    KEYWORD_SCORE_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_RANK_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    FUSED_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANKED_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    keyword_rank: int
    keyword_score: float
    semantic_rank: int
    semantic_similarity: float
    fused_score: float
    reranked: bool
    rerank_score: float
    tier: Source
    def __init__(self, keyword_rank: _Optional[int] = ..., keyword_score: _Optional[float] = ..., semantic_rank: _Optional[int] = ..., semantic_similarity: _Optional[float] = ..., fused_score: _Optional[float] = ..., reranked: _Optional[bool] = ..., rerank_score: _Optional[float] = ..., tier: _Optional[_Union[Source, str]] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("removed", "start_at_unix_nano")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    START_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    removed: int
    start_at_unix_nano: int
    def __init__(self, removed: _Optional[int] = ..., start_at_unix_nano: _Optional[int] = ...) -> None: ...

class SummarizeRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SummarizeResponse(_message.Message):
    __slots__ = ("count", "summary")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    count: int
    summary: Summary
    def __init__(self, count: _Optional[int] = ..., summary: _Optional[_Union[Summary, _Mapping]] = ...) -> None: ...

class GetSummaryRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSummaryResponse(_message.Message):
    __slots__ = ("summary", "cursor_unix_nano", "last_run")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CURSOR_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    summary: Summary
    cursor_unix_nano: int
    last_run: SummaryRun
    def __init__(self, summary: _Optional[_Union[Summary, _Mapping]] = ..., cursor_unix_nano: _Optional[int] = ..., last_run: _Optional[_Union[SummaryRun, _Mapping]] = ...) -> None: ...

class SummaryRun(_message.Message):
    __slots__ = ("trigger", "started_at_unix_nano", "finished_at_unix_nano", "outcome", "messages", "reason", "message")
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    trigger: SummaryTrigger
    started_at_unix_nano: int
    finished_at_unix_nano: int
    outcome: SummaryOutcome
    messages: int
    reason: str
    message: str
    def __init__(self, trigger: _Optional[_Union[SummaryTrigger, str]] = ..., started_at_unix_nano: _Optional[int] = ..., finished_at_unix_nano: _Optional[int] = ..., outcome: _Optional[_Union[SummaryOutcome, str]] = ..., messages: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("session_id", "mode")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    mode: ResetMode
    def __init__(self, session_id: _Optional[str] = ..., mode: _Optional[_Union[ResetMode, str]] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: Deleted
    def __init__(self, deleted: _Optional[_Union[Deleted, _Mapping]] = ...) -> None: ...

class RemoveSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RemoveSessionResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: Deleted
    def __init__(self, deleted: _Optional[_Union[Deleted, _Mapping]] = ...) -> None: ...

class Deleted(_message.Message):
    __slots__ = ("history_messages", "archived_messages", "vectors", "summary")
    HISTORY_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    history_messages: int
    archived_messages: int
    vectors: int
    summary: bool
    def __init__(self, history_messages: _Optional[int] = ..., archived_messages: _Optional[int] = ..., vectors: _Optional[int] = ..., summary: _Optional[bool] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "session_id_contains")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id_contains: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., session_id_contains: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_id", "message_count", "history_bytes", "last_append_unix_nano", "has_summary")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAST_APPEND_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    HAS_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    message_count: int
    history_bytes: int
    last_append_unix_nano: int
    has_summary: bool
    def __init__(self, session_id: _Optional[str] = ..., message_count: _Optional[int] = ..., history_bytes: _Optional[int] = ..., last_append_unix_nano: _Optional[int] = ..., has_summary: _Optional[bool] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("session_id", "page_size", "page_token", "newest_first", "omit_payloads")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    OMIT_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    page_size: int
    page_token: str
    newest_first: bool
    omit_payloads: bool
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: _Optional[bool] = ..., omit_payloads: _Optional[bool] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_page_token")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteMessagesRequest(_message.Message):
    __slots__ = ("session_id", "ids", "last")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    ids: _containers.RepeatedScalarFieldContainer[int]
    last: int
    def __init__(self, session_id: _Optional[str] = ..., ids: _Optional[_Iterable[int]] = ..., last: _Optional[int] = ...) -> None: ...

class DeleteMessagesResponse(_message.Message):
    __slots__ = ("messages", "deleted", "contents_omitted")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_OMITTED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    deleted: Deleted
    contents_omitted: int
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., deleted: _Optional[_Union[Deleted, _Mapping]] = ..., contents_omitted: _Optional[int] = ...) -> None: ...

class ReplaceMessagesRequest(_message.Message):
    __slots__ = ("session_id", "messages", "idempotency_key", "expected_last_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LAST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    idempotency_key: str
    expected_last_id: int
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., idempotency_key: _Optional[str] = ..., expected_last_id: _Optional[int] = ...) -> None: ...

class ReplaceMessagesResponse(_message.Message):
    __slots__ = ("messages", "replayed", "deleted")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    replayed: bool
    deleted: Deleted
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., replayed: _Optional[bool] = ..., deleted: _Optional[_Union[Deleted, _Mapping]] = ...) -> None: ...
