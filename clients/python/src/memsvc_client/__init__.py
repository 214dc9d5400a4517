"""memsvc-client: the Python client of memsvc, conversation memory for LLM agents over gRPC.

The package's public surface: the blocking and asyncio clients, their typed results and errors,
the retry policy. Must never add behaviour of its own.
"""

from importlib.metadata import version

from memsvc_client.aio import AsyncClient
from memsvc_client.client import Client
from memsvc_client.connection import DEFAULT_TIMEOUT, FIT_TIMEOUT, ChatMessage, MessageLike
from memsvc_client.errors import (
    AbortedError,
    AlreadyExistsError,
    CallCancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    MemsvcError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from memsvc_client.results import (
    AppendResponse,
    CompactResponse,
    CurrentDiscussion,
    Deleted,
    DeleteErrorResponse,
    DeleteMessagesResponse,
    ErrorRecord,
    ExportedMessage,
    ExportEnd,
    ExportSessionResponse,
    FitContextResponse,
    FitStageReport,
    GetContextResponse,
    GetServerInfoResponse,
    GetSummaryResponse,
    HitExplanation,
    HoldSessionResponse,
    ImportSessionResponse,
    ListErrorsResponse,
    ListHeldSessionsResponse,
    ListMessagesResponse,
    ListSessionsResponse,
    LookupErrorsResponse,
    Message,
    PastDiscussion,
    PauseSessionCreationResponse,
    RecordErrorResponse,
    ReleaseSessionResponse,
    RemoveSessionResponse,
    ResetResponse,
    SearchErrorsResponse,
    SearchHit,
    SearchResponse,
    SessionHead,
    SessionInfo,
    SummarizeResponse,
    Summary,
    SummaryCursor,
    SummaryRun,
    UpdateErrorActionResponse,
)
from memsvc_client.retry import DEFAULT_RETRY, RetryPolicy
from memsvc_client.rpcs import SESSION_METADATA

__version__ = version("memsvc-client")
"""The contract version (proto/VERSION) this client speaks."""

__all__ = [
    "DEFAULT_RETRY", "DEFAULT_TIMEOUT", "FIT_TIMEOUT", "SESSION_METADATA", "AbortedError", "AlreadyExistsError",
    "AppendResponse", "AsyncClient", "CallCancelledError", "ChatMessage", "Client", "CompactResponse",
    "CurrentDiscussion", "DataLossError", "DeadlineExceededError", "DeleteErrorResponse", "DeleteMessagesResponse",
    "Deleted", "ErrorRecord", "ExportEnd", "ExportSessionResponse", "ExportedMessage", "FailedPreconditionError",
    "FitContextResponse", "FitStageReport", "GetContextResponse", "GetServerInfoResponse", "GetSummaryResponse",
    "HitExplanation", "HoldSessionResponse", "ImportSessionResponse", "InternalError", "InvalidArgumentError",
    "ListErrorsResponse", "ListHeldSessionsResponse", "ListMessagesResponse", "ListSessionsResponse",
    "LookupErrorsResponse", "MemsvcError", "Message", "MessageLike", "NotFoundError", "OutOfRangeError",
    "PastDiscussion", "PauseSessionCreationResponse", "PermissionDeniedError", "RecordErrorResponse",
    "ReleaseSessionResponse", "RemoveSessionResponse", "ResetResponse", "ResourceExhaustedError", "RetryPolicy",
    "SearchErrorsResponse", "SearchHit", "SearchResponse", "SessionHead", "SessionInfo", "SummarizeResponse", "Summary",
    "SummaryCursor", "SummaryRun", "UnauthenticatedError", "UnavailableError", "UnimplementedError", "UnknownError",
    "UpdateErrorActionResponse", "__version__",
]
