"""The catalogue of error reasons: every `google.rpc.ErrorInfo.reason` memsvc answers, with its status.

Each reason is stable (clients switch on it), belongs to exactly one kind of
error (so to one status code), and has one line of meaning for docs/errors.md.
A domain error (errors.py) takes a `Reason` from here, never a string, so a
reason the catalogue lacks cannot be raised. Must never import grpc: the
kinds become status codes in rpc/status.py.
"""

from __future__ import annotations

import enum
from enum import auto


class Kind(enum.Enum):
    """What went wrong, as far as a caller is concerned: one status code each (rpc/status.py)."""

    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    FAILED_PRECONDITION = "failed_precondition"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    UNAVAILABLE = "unavailable"
    UNAUTHENTICATED = "unauthenticated"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    PERMISSION_DENIED = "permission_denied"
    INTERNAL = "internal"


class Reason(enum.StrEnum):
    """A reason, its kind and its meaning; its value is the UPPER_SNAKE name clients see."""

    kind: Kind
    meaning: str

    def __new__(cls, value: str, kind: Kind, meaning: str) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        member.meaning = meaning
        return member

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        return name  # auto(): the value is the member's own name

    # -- generic: an error of the kind with nothing more specific to say ------------------------------------
    INVALID_ARGUMENT = auto(), Kind.INVALID_ARGUMENT, "The request is invalid; the message says which field and why."
    NOT_FOUND = auto(), Kind.NOT_FOUND, "What the request names does not exist."
    ALREADY_EXISTS = auto(), Kind.ALREADY_EXISTS, "What the request would create exists already."
    FAILED_PRECONDITION = auto(), Kind.FAILED_PRECONDITION, "The server is not set up for this request."
    RESOURCE_EXHAUSTED = auto(), Kind.RESOURCE_EXHAUSTED, "A limit was reached."
    UNAVAILABLE = auto(), Kind.UNAVAILABLE, "The server cannot answer now; retry with backoff."
    PERMISSION_DENIED = auto(), Kind.PERMISSION_DENIED, "The caller may not do this."
    INTERNAL = auto(), Kind.INTERNAL, "A bug in memsvc; the server log has the details."

    # -- credentials and transport ---------------------------------------------------------------------------
    MISSING_TOKEN = auto(), Kind.UNAUTHENTICATED, "The server requires a bearer token and the request carried none."
    INVALID_TOKEN = auto(), Kind.UNAUTHENTICATED, "The bearer token is not one the server accepts (unknown or expired)."
    ROLE_FORBIDS = (auto(), Kind.PERMISSION_DENIED,
                    "The token's role may not make this call; the message and metadata name the role needed.")
    TENANT_FORBIDDEN = (auto(), Kind.PERMISSION_DENIED,
                        "memsvc-tenant names a tenant this token may not act for (or one the tenants file lacks).")
    TENANT_QUOTA = (auto(), Kind.RESOURCE_EXHAUSTED,
                    "The tenant's quota (max_sessions or max_bytes in its tenants file entry) is used up.")
    HOST_NOT_ALLOWED = (auto(), Kind.PERMISSION_DENIED,
                        "An HTTP request without a token named a Host the server does not answer.")
    MALFORMED_REQUEST = (auto(), Kind.INVALID_ARGUMENT,
                         "The request body could not be decoded as the method's request type.")
    REQUEST_TOO_LARGE = auto(), Kind.RESOURCE_EXHAUSTED, "The request is larger than max_request_bytes."
    CONCURRENT_RPC_LIMIT = (auto(), Kind.RESOURCE_EXHAUSTED,
                            "Too many calls in flight on this server; retry with backoff.")
    TOO_MANY_IN_FLIGHT = (auto(), Kind.RESOURCE_EXHAUSTED,
                          "Too many searches queued for this server or session; retry with backoff.")
    SHUTTING_DOWN = auto(), Kind.UNAVAILABLE, "The server is stopping; retry on another or after it restarts."
    DEADLINE_EXCEEDED = (auto(), Kind.DEADLINE_EXCEEDED,
                         "The caller's deadline passed (or it went away) before the change was made: nothing changed.")
    INVALID_ENUM = auto(), Kind.INVALID_ARGUMENT, "An enum field holds a value this server does not know."

    # -- sessions ---------------------------------------------------------------------------------------------
    INVALID_SESSION_ID = (auto(), Kind.INVALID_ARGUMENT,
                          "The session id is empty, too long or holds characters ids may not hold.")
    SESSION_NOT_FOUND = auto(), Kind.NOT_FOUND, "No session of that id is stored here."
    SESSION_EXISTS = auto(), Kind.ALREADY_EXISTS, "An import names a session that is stored here already."
    SESSION_QUOTA_EXCEEDED = (auto(), Kind.RESOURCE_EXHAUSTED,
                              "The server stores max_sessions sessions; a new one is refused.")
    SESSION_BEING_CLEARED = (auto(), Kind.UNAVAILABLE,
                             "An interrupted Reset, removal or deletion of the session is being completed.")
    SESSION_MOVING = auto(), Kind.UNAVAILABLE, "The session is held while it moves to another shard, or being imported."
    SESSION_CREATION_PAUSED = auto(), Kind.UNAVAILABLE, "Creating sessions is paused while shards change."
    SESSION_NOT_HELD = auto(), Kind.FAILED_PRECONDITION, "The call needs the session held first (HoldSession)."
    HOLD_QUOTA_EXCEEDED = (auto(), Kind.RESOURCE_EXHAUSTED,
                           "max_held_sessions sessions are held already; release some or let their leases lapse.")
    SESSION_IDS_EXHAUSTED = (auto(), Kind.RESOURCE_EXHAUSTED,
                             "The session's message ids reached 2^63 - 1; export what it holds into a new session.")
    SESSION_CHANGED = (auto(), Kind.UNAVAILABLE,
                       "Messages of the session were deleted during its export; export it again.")
    INVALID_PAGE_TOKEN = auto(), Kind.INVALID_ARGUMENT, "The page token is not one this server handed out."
    MESSAGE_TOO_LARGE_FOR_REPLY = (auto(), Kind.FAILED_PRECONDITION,
                                   "One stored message alone is larger than max_reply_bytes allows a reply; "
                                   "metadata message_id names it. Read it with omit_payloads.")
    REPLY_TOO_LARGE = (auto(), Kind.FAILED_PRECONDITION,
                       "FitContext's fitted run is larger than max_reply_bytes allows a reply; pass a smaller "
                       "context_window.")

    # -- messages ---------------------------------------------------------------------------------------------
    NO_MESSAGES = auto(), Kind.INVALID_ARGUMENT, "An Append carried no message."
    TOO_MANY_MESSAGES = auto(), Kind.INVALID_ARGUMENT, "More messages in one request than max_messages_per_request."
    INVALID_ROLE = auto(), Kind.INVALID_ARGUMENT, "A message's role is not user, assistant, system or tool."
    EMPTY_CONTENT = auto(), Kind.INVALID_ARGUMENT, "A message's content is empty."
    MESSAGE_TOO_LARGE = auto(), Kind.INVALID_ARGUMENT, "A message's content is larger than max_message_bytes."
    PAYLOAD_TOO_LARGE = auto(), Kind.INVALID_ARGUMENT, "A message's payload_json is larger than max_message_bytes."
    INVALID_PAYLOAD = auto(), Kind.INVALID_ARGUMENT, "A message's payload_json is not valid JSON."
    SENDER_TOO_LONG = auto(), Kind.INVALID_ARGUMENT, "A message's sender is longer than 256 characters."
    INVALID_TIME = auto(), Kind.INVALID_ARGUMENT, "A time is negative or out of range."
    IDEMPOTENCY_KEY_TOO_LONG = auto(), Kind.INVALID_ARGUMENT, "The idempotency key is longer than 256 characters."
    DELETE_TARGET_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "DeleteMessages named neither ids nor last."
    DELETE_TARGET_AMBIGUOUS = auto(), Kind.INVALID_ARGUMENT, "DeleteMessages named both ids and last."
    EMBEDDINGS_IN_REPLACE = (auto(), Kind.INVALID_ARGUMENT,
                             "ReplaceMessages carries no client-supplied embeddings; Append messages that have them.")
    HISTORY_CHANGED = (auto(), Kind.FAILED_PRECONDITION,
                       "The session's newest message is not the one ReplaceMessages expected: read it again.")

    # -- storage ----------------------------------------------------------------------------------------------
    DISK_FULL = auto(), Kind.RESOURCE_EXHAUSTED, "The disk (or the lesson database's) is full; nothing was stored."
    STORAGE_ERROR = auto(), Kind.UNAVAILABLE, "A write failed; nothing was stored; retry later."
    DATA_DIR_MISSING = auto(), Kind.UNAVAILABLE, "The data directory was deleted or replaced under the running server."
    HISTORY_UNREADABLE = auto(), Kind.FAILED_PRECONDITION, "The session's history.json cannot be read; move it aside."
    SUMMARY_UNREADABLE = (auto(), Kind.FAILED_PRECONDITION,
                          "The session's summary.json cannot be read; fix or delete it.")
    SUMMARY_CURSOR_UNREADABLE = auto(), Kind.FAILED_PRECONDITION, "The session's .summary_cursor cannot be read."
    ARCHIVE_BEHIND = auto(), Kind.UNAVAILABLE, "The archive has not committed what this call needs yet; retry shortly."
    ARCHIVE_UNAVAILABLE = auto(), Kind.UNAVAILABLE, "The archive cannot commit now; retry later."
    ARCHIVE_DAMAGED = auto(), Kind.FAILED_PRECONDITION, "The archive index is damaged; the message names the remedy."
    ARCHIVE_SESSION_SET_ASIDE = (auto(), Kind.FAILED_PRECONDITION,
                                 "The archive could not store this session's messages; reset or remove it.")

    # -- export and import ------------------------------------------------------------------------------------
    IMPORT_HEAD_MISSING = auto(), Kind.INVALID_ARGUMENT, "An import did not start with the head of an export."
    IMPORT_OUT_OF_ORDER = auto(), Kind.INVALID_ARGUMENT, "An import's parts or message ids are out of order."
    IMPORT_INCOMPLETE = auto(), Kind.INVALID_ARGUMENT, "An import ended before its end part; nothing was stored."
    IMPORT_MISMATCH = (auto(), Kind.INVALID_ARGUMENT,
                       "An import does not match its end part's totals; nothing was stored.")
    IMPORT_STALLED = auto(), Kind.UNAVAILABLE, "An import's client stopped sending; nothing was stored."
    EXPORT_STALLED = (auto(), Kind.UNAVAILABLE,
                      "An export's reader took no part for stream_idle_seconds; the server ended the export.")
    IMPORT_HEAD_INVALID = (auto(), Kind.INVALID_ARGUMENT,
                           "An import's head holds an id, time or cursor out of range; nothing was stored.")
    IMPORT_SUMMARY_INVALID = (auto(), Kind.INVALID_ARGUMENT,
                              "An import's summary_json is not a summary memsvc can read; nothing was stored.")

    # -- search -----------------------------------------------------------------------------------------------
    EMPTY_QUERY = auto(), Kind.INVALID_ARGUMENT, "A search carried no words (or no query embedding)."
    QUERY_TOO_LONG = auto(), Kind.INVALID_ARGUMENT, "A search's query is longer than allowed."
    INVALID_LIMIT = auto(), Kind.INVALID_ARGUMENT, "A limit or page size is out of range."
    INVALID_TIME_RANGE = auto(), Kind.INVALID_ARGUMENT, "A time range is unknown, or since is after until."

    # -- vectors and embedders --------------------------------------------------------------------------------
    EMBEDDINGS_NOT_ACCEPTED = auto(), Kind.FAILED_PRECONDITION, "This server takes no client-supplied embeddings."
    INVALID_EMBEDDING = (auto(), Kind.INVALID_ARGUMENT,
                         "A client-supplied embedding is not finite or has the wrong size.")
    EMBEDDING_TOO_LARGE = (auto(), Kind.INVALID_ARGUMENT,
                           "A client-supplied embedding has more dimensions than any index holds.")
    EMBEDDING_DIMENSION_UNEXPECTED = (auto(), Kind.FAILED_PRECONDITION,
                                      "The embedder returned vectors of another dimension than configured.")
    VECTOR_DIMENSION_MISMATCH = (auto(), Kind.INVALID_ARGUMENT,
                                 "A supplied embedding has another dimension than this server's embedder makes.")
    EMBEDDER_UNAVAILABLE = auto(), Kind.UNAVAILABLE, "The embedding provider cannot be reached; retry later."
    EMBEDDER_REJECTED = auto(), Kind.UNAVAILABLE, "The embedding provider refused the request."

    # -- summaries and LLMs -----------------------------------------------------------------------------------
    SUMMARY_MODEL_NOT_CONFIGURED = auto(), Kind.FAILED_PRECONDITION, "Summarize needs summary_model and llm_base_url."
    LLM_UNAVAILABLE = auto(), Kind.UNAVAILABLE, "The LLM endpoint cannot be reached or failed; retry later."
    LLM_REQUEST_REJECTED = auto(), Kind.FAILED_PRECONDITION, "The LLM endpoint refused the request."
    LLM_AUTH_FAILED = auto(), Kind.FAILED_PRECONDITION, "The LLM endpoint refused memsvc's API key."
    LLM_NOT_FOUND = auto(), Kind.FAILED_PRECONDITION, "The LLM endpoint does not know the configured model."
    LLM_BAD_RESPONSE = (auto(), Kind.INTERNAL,
                        "The LLM endpoint answered 200 with something that is not a chat completion.")
    LLM_REPLY_UNPARSEABLE = auto(), Kind.UNAVAILABLE, "The summary model's reply held no valid summary; retry."
    LLM_REPLY_EMPTY = auto(), Kind.UNAVAILABLE, "The summary model's reply was empty; retry."

    # -- in-run compaction (FitContext) -----------------------------------------------------------------------
    MODEL_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "FitContext needs a model (or a context window)."
    NO_BUDGET = auto(), Kind.INVALID_ARGUMENT, "The reserved tokens leave no budget for messages."
    INVALID_CHAT_MESSAGE = (auto(), Kind.INVALID_ARGUMENT,
                            "A FitContext message is not a chat-completions message object.")
    CONTEXT_TOO_LARGE = auto(), Kind.FAILED_PRECONDITION, "The run cannot be brought within the model's window."

    # -- error memory -----------------------------------------------------------------------------------------
    TOOL_NAME_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "A lesson needs a tool name."
    INVALID_TOOL_NAME = auto(), Kind.INVALID_ARGUMENT, "A tool name is too long or holds control characters."
    SYMPTOM_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "A lesson needs a symptom."
    ACTION_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "A lesson needs an action (the fix)."
    OUTCOME_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "RecordError needs an outcome."
    INVALID_OUTCOME = auto(), Kind.INVALID_ARGUMENT, "The outcome is not one of resolved, failed, abandoned."
    FIELD_TOO_LARGE = auto(), Kind.INVALID_ARGUMENT, "A lesson's field is larger than allowed."
    KEYWORD_TOO_LONG = auto(), Kind.INVALID_ARGUMENT, "A lesson's keyword is longer than allowed."
    TOO_MANY_KEYWORDS = auto(), Kind.INVALID_ARGUMENT, "A lesson has more keywords than allowed."
    ERROR_ID_REQUIRED = auto(), Kind.INVALID_ARGUMENT, "The call needs a lesson id."
    INVALID_ERROR_ID = auto(), Kind.INVALID_ARGUMENT, "The lesson id is not one this server hands out."
    ERROR_RECORD_NOT_FOUND = auto(), Kind.NOT_FOUND, "No lesson of that id (it may have expired)."
    LESSONS_SCHEMA_TOO_NEW = auto(), Kind.FAILED_PRECONDITION, "The lesson database was written by a newer memsvc."
    LESSONS_DATABASE_UNAVAILABLE = auto(), Kind.UNAVAILABLE, "Error memory's PostgreSQL cannot be reached or is busy."
    LESSONS_DATABASE_AUTH_FAILED = auto(), Kind.FAILED_PRECONDITION, "Error memory's PostgreSQL refused memsvc's login."
    LESSONS_DATABASE_NOT_FOUND = auto(), Kind.FAILED_PRECONDITION, "The database named in lessons_dsn does not exist."
    LESSONS_DATABASE_PERMISSION_DENIED = auto(), Kind.FAILED_PRECONDITION, "The lesson database's user may not do this."
    LESSONS_DATABASE_EXHAUSTED = (auto(), Kind.RESOURCE_EXHAUSTED,
                                  "Error memory's PostgreSQL is out of memory or connections.")
