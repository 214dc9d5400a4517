"""The typed results of memsvc calls: one dataclass per contract message a call returns.

Owns only the shapes: every attribute is named as its proto field, enums are their lower-case
names ("user", "archive", "resolved"; "" when unset), 64-bit integers are ints, an unset message
is None. Must never hold behaviour: `convert` fills them from the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_result = dataclass(slots=True, kw_only=True)


@_result
class Message:
    """One stored conversation message; also accepted as input to `append`."""

    id: int = 0
    role: str = ""
    content: str = ""
    sender: str = ""
    send_at_unix_nano: int = 0
    embedding: list[float] = field(default_factory=list)
    payload_json: str = ""


@_result
class PastDiscussion:
    topic: str = ""
    description: str = ""
    direction: str = ""
    last_discussed: str = ""


@_result
class CurrentDiscussion:
    topic: str = ""
    description: str = ""
    perspectives: str = ""
    direction: str = ""


@_result
class Summary:
    key_decisions: list[str] = field(default_factory=list)
    past_discussions: list[PastDiscussion] = field(default_factory=list)
    current_discussion: CurrentDiscussion | None = None
    json: str = ""


@_result
class AppendResponse:
    messages: list[Message] = field(default_factory=list)
    replayed: bool = False


@_result
class GetContextResponse:
    window: list[Message] = field(default_factory=list)
    turn_context: Message | None = None
    summary: Summary | None = None
    omitted_messages: int = 0
    """How many of the window's oldest messages the server left out to keep its reply within
    max_reply_bytes; `transcript.every_message` or list_messages(newest_first=True,
    page_token=older_page_token) reads them."""
    older_page_token: str = ""


@_result
class HitExplanation:
    keyword_rank: int = 0
    keyword_score: float = 0.0
    semantic_rank: int = 0
    semantic_similarity: float = 0.0
    fused_score: float = 0.0
    reranked: bool = False
    rerank_score: float = 0.0
    tier: str = ""


@_result
class SearchHit:
    message: Message | None = None
    source: str = ""
    score: float = 0.0
    is_context: bool = False
    run: int = 0
    explanation: HitExplanation | None = None
    """With search(..., explain=True): why this match was found; None for context messages."""


@_result
class SearchResponse:
    hits: list[SearchHit] = field(default_factory=list)
    unsearched: int = 0
    omitted_hits: int = 0
    "How many of the lowest-ranked hits the server left out to keep its reply within max_reply_bytes."


@_result
class CompactResponse:
    removed: int = 0
    start_at_unix_nano: int = 0


@_result
class SummarizeResponse:
    count: int = 0
    summary: Summary | None = None


@_result
class SummaryRun:
    """How a summary run went: `trigger` "job", "summarize" or "fit_context"; `outcome` "summarized",
    "nothing_new" or "failed" (with the failure's `reason` and `message`)."""

    trigger: str = ""
    started_at_unix_nano: int = 0
    finished_at_unix_nano: int = 0
    outcome: str = ""
    messages: int = 0
    reason: str = ""
    message: str = ""


@_result
class GetSummaryResponse:
    summary: Summary | None = None
    cursor_unix_nano: int = 0
    last_run: SummaryRun | None = None


@_result
class Deleted:
    history_messages: int = 0
    archived_messages: int = 0
    vectors: int = 0
    summary: bool = False


@_result
class ResetResponse:
    deleted: Deleted | None = None


@_result
class RemoveSessionResponse:
    deleted: Deleted | None = None


@_result
class SessionInfo:
    session_id: str = ""
    message_count: int = 0
    history_bytes: int = 0
    last_append_unix_nano: int = 0
    has_summary: bool = False


@_result
class ListSessionsResponse:
    sessions: list[SessionInfo] = field(default_factory=list)
    next_page_token: str = ""


@_result
class ListMessagesResponse:
    messages: list[Message] = field(default_factory=list)
    next_page_token: str = ""


@_result
class DeleteMessagesResponse:
    messages: list[Message] = field(default_factory=list)
    deleted: Deleted | None = None
    contents_omitted: int = 0
    "How many of the oldest echoed messages came without content and payload_json (max_reply_bytes)."


@_result
class ReplaceMessagesResponse:
    messages: list[Message] = field(default_factory=list)
    replayed: bool = False
    deleted: Deleted | None = None


@_result
class ErrorRecord:
    """One stored lesson of error memory."""

    id: str = ""
    tool_name: str = ""
    keywords: list[str] = field(default_factory=list)
    symptom: str = ""
    cause: str = ""
    action: str = ""
    outcome: str = ""
    session_id: str = ""
    created_at_unix_nano: int = 0
    last_hit_unix_nano: int = 0
    expires_at_unix_nano: int = 0
    hit_count: int = 0


@_result
class RecordErrorResponse:
    record: ErrorRecord | None = None
    stored: bool = False
    refreshed: bool = False
    detail: str = ""


@_result
class LookupErrorsResponse:
    records: list[ErrorRecord] = field(default_factory=list)
    related_errors: str = ""


@_result
class SearchErrorsResponse:
    records: list[ErrorRecord] = field(default_factory=list)


@_result
class ListErrorsResponse:
    records: list[ErrorRecord] = field(default_factory=list)
    next_page_token: str = ""


@_result
class UpdateErrorActionResponse:
    record: ErrorRecord | None = None


@_result
class DeleteErrorResponse:
    record: ErrorRecord | None = None


@_result
class GetServerInfoResponse:
    """Which server answered: its shard, version and data directory (and, asked about a session,
    whether it stores or holds it)."""

    shard_name: str = ""
    version: str = ""
    contract_version: str = ""
    data_dir_id: str = ""
    started_at_unix_nano: int = 0
    session_stored: bool = False
    session_held: bool = False
    held_sessions: int = 0
    session_creation_paused_until_unix_nano: int = 0
    hold_lease_seconds: float = 0.0
    session_hold_until_unix_nano: int = 0


@_result
class SummaryCursor:
    message_id: int = 0
    send_at_unix_nano: int = 0


@_result
class SessionHead:
    """An exported session's state apart from its messages."""

    session_id: str = ""
    next_id: int = 0
    first_recent_id: int = 0
    start_at_unix_nano: int = 0
    summary_json: str = ""
    summary_cursor: SummaryCursor | None = None
    recent_messages: int = 0
    exported_by: str = ""
    exported_at_unix_nano: int = 0
    tenant: str = ""
    summary_last_run: SummaryRun | None = None


@_result
class ExportedMessage:
    message: Message | None = None
    idempotency_key: str = ""


@_result
class ExportEnd:
    messages: int = 0
    last_id: int = 0
    sha256: str = ""


@_result
class ExportSessionResponse:
    """One part of an exported session: the head, then pages of messages, then the end. Also what
    `import_session` takes."""

    head: SessionHead | None = None
    messages: list[ExportedMessage] = field(default_factory=list)
    end: ExportEnd | None = None


@_result
class ImportSessionResponse:
    session_id: str = ""
    messages: int = 0
    sha256: str = ""
    held: bool = False


@_result
class HoldSessionResponse:
    stored: bool = False


@_result
class ReleaseSessionResponse:
    was_held: bool = False
    deleted: Deleted | None = None


@_result
class ListHeldSessionsResponse:
    session_ids: list[str] = field(default_factory=list)
    next_page_token: str = ""


@_result
class ListTenantsResponse:
    tenants: list[str] = field(default_factory=list)


@_result
class PauseSessionCreationResponse:
    paused_until_unix_nano: int = 0


@_result
class FitStageReport:
    """What one stage of FitContext did: `stage` ("check_threshold", "extract_old_histories",
    "tool_history", "trim_fallback", "raw_tool_fallback") and `outcome` ("compacted", "unchanged",
    "skipped", "failed"), with a stable `reason` for the last two."""

    stage: str = ""
    outcome: str = ""
    reason: str = ""
    detail: str = ""
    messages_removed: int = 0
    tokens_after: int = 0


@_result
class FitContextResponse:
    """A run fitted to its model's window: `messages` are the JSON strings to send (those no stage
    changed come back byte for byte); `window_source` is "shipped", "fetched", "endpoint",
    "fallback" or "request"; `counting` "exact" or "estimate". `fits` says whether the run is
    within `target_tokens`; when it is not, `unfit_reason` says why (SUMMARY_CALL_LIMIT:
    call again with these messages to fold more; DEADLINE_TOO_SHORT, LLM_NOT_CONFIGURED,
    SESSION_NOT_FOUND, a model call's failure, NOTHING_LEFT_TO_COMPACT)."""

    messages: list[str] = field(default_factory=list)
    context_window: int = 0
    window_source: str = ""
    window_entry: str = ""
    budget_tokens: int = 0
    target_tokens: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    counting: str = ""
    tokenizer: str = ""
    stages: list[FitStageReport] = field(default_factory=list)
    fits: bool = False
    changed: bool = False
    unfit_reason: str = ""
    messages_omitted: bool = False
    "True when `messages` is empty: the run came back unchanged and too large for a reply; send it as it was."
