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
    FitContextResponse,
    FitStageReport,
    GetContextResponse,
    GetSummaryResponse,
    ListErrorsResponse,
    ListMessagesResponse,
    ListSessionsResponse,
    LookupErrorsResponse,
    Message,
    PastDiscussion,
    RecordErrorResponse,
    RemoveSessionResponse,
    ResetResponse,
    SearchErrorsResponse,
    SearchHit,
    SearchResponse,
    SessionInfo,
    SummarizeResponse,
    Summary,
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
    "Deleted", "ErrorRecord", "FailedPreconditionError", "FitContextResponse", "FitStageReport",
    "GetContextResponse", "GetSummaryResponse", "InternalError", "InvalidArgumentError", "ListErrorsResponse",
    "ListMessagesResponse", "ListSessionsResponse", "LookupErrorsResponse", "MemsvcError", "Message", "MessageLike",
    "NotFoundError", "OutOfRangeError", "PastDiscussion", "PermissionDeniedError", "RecordErrorResponse",
    "RemoveSessionResponse", "ResetResponse", "ResourceExhaustedError", "RetryPolicy", "SearchErrorsResponse",
    "SearchHit", "SearchResponse", "SessionInfo", "SummarizeResponse", "Summary", "UnauthenticatedError",
    "UnavailableError", "UnimplementedError", "UnknownError", "UpdateErrorActionResponse", "__version__",
]
