from memsvc_client.v1 import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetServerInfoRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("shard_name", "version", "contract_version", "data_dir_id", "started_at_unix_nano", "session_stored", "session_held", "held_sessions", "session_creation_paused_until_unix_nano", "hold_lease_seconds", "session_hold_until_unix_nano")
    SHARD_NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    SESSION_STORED_FIELD_NUMBER: _ClassVar[int]
    SESSION_HELD_FIELD_NUMBER: _ClassVar[int]
    HELD_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_CREATION_PAUSED_UNTIL_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    HOLD_LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_HOLD_UNTIL_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    shard_name: str
    version: str
    contract_version: str
    data_dir_id: str
    started_at_unix_nano: int
    session_stored: bool
    session_held: bool
    held_sessions: int
    session_creation_paused_until_unix_nano: int
    hold_lease_seconds: float
    session_hold_until_unix_nano: int
    def __init__(self, shard_name: _Optional[str] = ..., version: _Optional[str] = ..., contract_version: _Optional[str] = ..., data_dir_id: _Optional[str] = ..., started_at_unix_nano: _Optional[int] = ..., session_stored: _Optional[bool] = ..., session_held: _Optional[bool] = ..., held_sessions: _Optional[int] = ..., session_creation_paused_until_unix_nano: _Optional[int] = ..., hold_lease_seconds: _Optional[float] = ..., session_hold_until_unix_nano: _Optional[int] = ...) -> None: ...

class ExportSessionRequest(_message.Message):
    __slots__ = ("session_id", "page_size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    page_size: int
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ExportSessionResponse(_message.Message):
    __slots__ = ("head", "messages", "end")
    HEAD_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    head: SessionHead
    messages: _containers.RepeatedCompositeFieldContainer[ExportedMessage]
    end: ExportEnd
    def __init__(self, head: _Optional[_Union[SessionHead, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[ExportedMessage, _Mapping]]] = ..., end: _Optional[_Union[ExportEnd, _Mapping]] = ...) -> None: ...

class SessionHead(_message.Message):
    __slots__ = ("session_id", "next_id", "first_recent_id", "start_at_unix_nano", "summary_json", "summary_cursor", "recent_messages", "exported_by", "exported_at_unix_nano", "tenant", "summary_last_run")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_RECENT_ID_FIELD_NUMBER: _ClassVar[int]
    START_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_JSON_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_CURSOR_FIELD_NUMBER: _ClassVar[int]
    RECENT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_BY_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    next_id: int
    first_recent_id: int
    start_at_unix_nano: int
    summary_json: str
    summary_cursor: SummaryCursor
    recent_messages: int
    exported_by: str
    exported_at_unix_nano: int
    tenant: str
    summary_last_run: _memory_pb2.SummaryRun
    def __init__(self, session_id: _Optional[str] = ..., next_id: _Optional[int] = ..., first_recent_id: _Optional[int] = ..., start_at_unix_nano: _Optional[int] = ..., summary_json: _Optional[str] = ..., summary_cursor: _Optional[_Union[SummaryCursor, _Mapping]] = ..., recent_messages: _Optional[int] = ..., exported_by: _Optional[str] = ..., exported_at_unix_nano: _Optional[int] = ..., tenant: _Optional[str] = ..., summary_last_run: _Optional[_Union[_memory_pb2.SummaryRun, _Mapping]] = ...) -> None: ...

class SummaryCursor(_message.Message):
    __slots__ = ("message_id", "send_at_unix_nano")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    message_id: int
    send_at_unix_nano: int
    def __init__(self, message_id: _Optional[int] = ..., send_at_unix_nano: _Optional[int] = ...) -> None: ...

class ExportedMessage(_message.Message):
    __slots__ = ("message", "idempotency_key")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    message: _memory_pb2.Message
    idempotency_key: str
    def __init__(self, message: _Optional[_Union[_memory_pb2.Message, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ExportEnd(_message.Message):
    __slots__ = ("messages", "last_id", "sha256")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    messages: int
    last_id: int
    sha256: str
    def __init__(self, messages: _Optional[int] = ..., last_id: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class ImportSessionRequest(_message.Message):
    __slots__ = ("head", "messages", "end")
    HEAD_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    head: SessionHead
    messages: _containers.RepeatedCompositeFieldContainer[ExportedMessage]
    end: ExportEnd
    def __init__(self, head: _Optional[_Union[SessionHead, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[ExportedMessage, _Mapping]]] = ..., end: _Optional[_Union[ExportEnd, _Mapping]] = ...) -> None: ...

class ImportSessionResponse(_message.Message):
    __slots__ = ("session_id", "messages", "sha256", "held")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    messages: int
    sha256: str
    held: bool
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[int] = ..., sha256: _Optional[str] = ..., held: _Optional[bool] = ...) -> None: ...

class HoldSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class HoldSessionResponse(_message.Message):
    __slots__ = ("stored",)
    STORED_FIELD_NUMBER: _ClassVar[int]
    stored: bool
    def __init__(self, stored: _Optional[bool] = ...) -> None: ...

class ReleaseSessionRequest(_message.Message):
    __slots__ = ("session_id", "drop")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    drop: bool
    def __init__(self, session_id: _Optional[str] = ..., drop: _Optional[bool] = ...) -> None: ...

class ReleaseSessionResponse(_message.Message):
    __slots__ = ("was_held", "deleted")
    WAS_HELD_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    was_held: bool
    deleted: _memory_pb2.Deleted
    def __init__(self, was_held: _Optional[bool] = ..., deleted: _Optional[_Union[_memory_pb2.Deleted, _Mapping]] = ...) -> None: ...

class ListHeldSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListHeldSessionsResponse(_message.Message):
    __slots__ = ("session_ids", "next_page_token")
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseSessionCreationRequest(_message.Message):
    __slots__ = ("seconds",)
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    seconds: int
    def __init__(self, seconds: _Optional[int] = ...) -> None: ...

class PauseSessionCreationResponse(_message.Message):
    __slots__ = ("paused_until_unix_nano",)
    PAUSED_UNTIL_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    paused_until_unix_nano: int
    def __init__(self, paused_until_unix_nano: _Optional[int] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants",)
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenants: _Optional[_Iterable[str]] = ...) -> None: ...
