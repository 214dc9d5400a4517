from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_RESOLVED: _ClassVar[Outcome]
    OUTCOME_FAILED: _ClassVar[Outcome]
    OUTCOME_ABANDONED: _ClassVar[Outcome]
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_RESOLVED: Outcome
OUTCOME_FAILED: Outcome
OUTCOME_ABANDONED: Outcome

class ErrorRecord(_message.Message):
    __slots__ = ("id", "tool_name", "keywords", "symptom", "cause", "action", "outcome", "session_id", "created_at_unix_nano", "last_hit_unix_nano", "expires_at_unix_nano", "hit_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    SYMPTOM_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    LAST_HIT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_UNIX_NANO_FIELD_NUMBER: _ClassVar[int]
    HIT_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tool_name: str
    keywords: _containers.RepeatedScalarFieldContainer[str]
    symptom: str
    cause: str
    action: str
    outcome: Outcome
    session_id: str
    created_at_unix_nano: int
    last_hit_unix_nano: int
    expires_at_unix_nano: int
    hit_count: int
    def __init__(self, id: _Optional[str] = ..., tool_name: _Optional[str] = ..., keywords: _Optional[_Iterable[str]] = ..., symptom: _Optional[str] = ..., cause: _Optional[str] = ..., action: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., session_id: _Optional[str] = ..., created_at_unix_nano: _Optional[int] = ..., last_hit_unix_nano: _Optional[int] = ..., expires_at_unix_nano: _Optional[int] = ..., hit_count: _Optional[int] = ...) -> None: ...

class RecordErrorRequest(_message.Message):
    __slots__ = ("tool_name", "keywords", "symptom", "cause", "action", "outcome", "session_id")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    SYMPTOM_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    keywords: _containers.RepeatedScalarFieldContainer[str]
    symptom: str
    cause: str
    action: str
    outcome: Outcome
    session_id: str
    def __init__(self, tool_name: _Optional[str] = ..., keywords: _Optional[_Iterable[str]] = ..., symptom: _Optional[str] = ..., cause: _Optional[str] = ..., action: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., session_id: _Optional[str] = ...) -> None: ...

class RecordErrorResponse(_message.Message):
    __slots__ = ("record", "stored", "refreshed", "detail")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    REFRESHED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    record: ErrorRecord
    stored: bool
    refreshed: bool
    detail: str
    def __init__(self, record: _Optional[_Union[ErrorRecord, _Mapping]] = ..., stored: _Optional[bool] = ..., refreshed: _Optional[bool] = ..., detail: _Optional[str] = ...) -> None: ...

class LookupErrorsRequest(_message.Message):
    __slots__ = ("tool_name", "error_text", "limit")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_TEXT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    error_text: str
    limit: int
    def __init__(self, tool_name: _Optional[str] = ..., error_text: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class LookupErrorsResponse(_message.Message):
    __slots__ = ("records", "related_errors")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RELATED_ERRORS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ErrorRecord]
    related_errors: str
    def __init__(self, records: _Optional[_Iterable[_Union[ErrorRecord, _Mapping]]] = ..., related_errors: _Optional[str] = ...) -> None: ...

class SearchErrorsRequest(_message.Message):
    __slots__ = ("query", "limit")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    query: str
    limit: int
    def __init__(self, query: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchErrorsResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ErrorRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[ErrorRecord, _Mapping]]] = ...) -> None: ...

class ListErrorsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "tool_name")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    tool_name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., tool_name: _Optional[str] = ...) -> None: ...

class ListErrorsResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ErrorRecord]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[ErrorRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateErrorActionRequest(_message.Message):
    __slots__ = ("id", "action")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    action: str
    def __init__(self, id: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class UpdateErrorActionResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: ErrorRecord
    def __init__(self, record: _Optional[_Union[ErrorRecord, _Mapping]] = ...) -> None: ...

class DeleteErrorRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteErrorResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: ErrorRecord
    def __init__(self, record: _Optional[_Union[ErrorRecord, _Mapping]] = ...) -> None: ...
