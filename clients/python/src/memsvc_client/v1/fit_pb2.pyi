from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WindowSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WINDOW_SOURCE_UNSPECIFIED: _ClassVar[WindowSource]
    WINDOW_SOURCE_SHIPPED: _ClassVar[WindowSource]
    WINDOW_SOURCE_FETCHED: _ClassVar[WindowSource]
    WINDOW_SOURCE_ENDPOINT: _ClassVar[WindowSource]
    WINDOW_SOURCE_FALLBACK: _ClassVar[WindowSource]
    WINDOW_SOURCE_REQUEST: _ClassVar[WindowSource]

class TokenCounting(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_COUNTING_UNSPECIFIED: _ClassVar[TokenCounting]
    TOKEN_COUNTING_EXACT: _ClassVar[TokenCounting]
    TOKEN_COUNTING_ESTIMATE: _ClassVar[TokenCounting]

class FitStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FIT_STAGE_UNSPECIFIED: _ClassVar[FitStage]
    FIT_STAGE_CHECK_THRESHOLD: _ClassVar[FitStage]
    FIT_STAGE_EXTRACT_OLD_HISTORIES: _ClassVar[FitStage]
    FIT_STAGE_TOOL_HISTORY: _ClassVar[FitStage]
    FIT_STAGE_TRIM_FALLBACK: _ClassVar[FitStage]
    FIT_STAGE_RAW_TOOL_FALLBACK: _ClassVar[FitStage]

class FitOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FIT_OUTCOME_UNSPECIFIED: _ClassVar[FitOutcome]
    FIT_OUTCOME_COMPACTED: _ClassVar[FitOutcome]
    FIT_OUTCOME_UNCHANGED: _ClassVar[FitOutcome]
    FIT_OUTCOME_SKIPPED: _ClassVar[FitOutcome]
    FIT_OUTCOME_FAILED: _ClassVar[FitOutcome]
WINDOW_SOURCE_UNSPECIFIED: WindowSource
WINDOW_SOURCE_SHIPPED: WindowSource
WINDOW_SOURCE_FETCHED: WindowSource
WINDOW_SOURCE_ENDPOINT: WindowSource
WINDOW_SOURCE_FALLBACK: WindowSource
WINDOW_SOURCE_REQUEST: WindowSource
TOKEN_COUNTING_UNSPECIFIED: TokenCounting
TOKEN_COUNTING_EXACT: TokenCounting
TOKEN_COUNTING_ESTIMATE: TokenCounting
FIT_STAGE_UNSPECIFIED: FitStage
FIT_STAGE_CHECK_THRESHOLD: FitStage
FIT_STAGE_EXTRACT_OLD_HISTORIES: FitStage
FIT_STAGE_TOOL_HISTORY: FitStage
FIT_STAGE_TRIM_FALLBACK: FitStage
FIT_STAGE_RAW_TOOL_FALLBACK: FitStage
FIT_OUTCOME_UNSPECIFIED: FitOutcome
FIT_OUTCOME_COMPACTED: FitOutcome
FIT_OUTCOME_UNCHANGED: FitOutcome
FIT_OUTCOME_SKIPPED: FitOutcome
FIT_OUTCOME_FAILED: FitOutcome

class FitContextRequest(_message.Message):
    __slots__ = ("session_id", "vendor", "model", "messages", "overflow", "previous_model", "context_window", "reserved_tokens")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_MODEL_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    RESERVED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    vendor: str
    model: str
    messages: _containers.RepeatedScalarFieldContainer[str]
    overflow: bool
    previous_model: str
    context_window: int
    reserved_tokens: int
    def __init__(self, session_id: _Optional[str] = ..., vendor: _Optional[str] = ..., model: _Optional[str] = ..., messages: _Optional[_Iterable[str]] = ..., overflow: _Optional[bool] = ..., previous_model: _Optional[str] = ..., context_window: _Optional[int] = ..., reserved_tokens: _Optional[int] = ...) -> None: ...

class FitContextResponse(_message.Message):
    __slots__ = ("messages", "context_window", "window_source", "window_entry", "budget_tokens", "target_tokens", "tokens_before", "tokens_after", "counting", "tokenizer", "stages", "fits", "changed", "unfit_reason", "messages_omitted")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SOURCE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ENTRY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TARGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNTING_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    FITS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    UNFIT_REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_OMITTED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedScalarFieldContainer[str]
    context_window: int
    window_source: WindowSource
    window_entry: str
    budget_tokens: int
    target_tokens: int
    tokens_before: int
    tokens_after: int
    counting: TokenCounting
    tokenizer: str
    stages: _containers.RepeatedCompositeFieldContainer[FitStageReport]
    fits: bool
    changed: bool
    unfit_reason: str
    messages_omitted: bool
    def __init__(self, messages: _Optional[_Iterable[str]] = ..., context_window: _Optional[int] = ..., window_source: _Optional[_Union[WindowSource, str]] = ..., window_entry: _Optional[str] = ..., budget_tokens: _Optional[int] = ..., target_tokens: _Optional[int] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ..., counting: _Optional[_Union[TokenCounting, str]] = ..., tokenizer: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[FitStageReport, _Mapping]]] = ..., fits: _Optional[bool] = ..., changed: _Optional[bool] = ..., unfit_reason: _Optional[str] = ..., messages_omitted: _Optional[bool] = ...) -> None: ...

class FitStageReport(_message.Message):
    __slots__ = ("stage", "outcome", "reason", "detail", "messages_removed", "tokens_after")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    stage: FitStage
    outcome: FitOutcome
    reason: str
    detail: str
    messages_removed: int
    tokens_after: int
    def __init__(self, stage: _Optional[_Union[FitStage, str]] = ..., outcome: _Optional[_Union[FitOutcome, str]] = ..., reason: _Optional[str] = ..., detail: _Optional[str] = ..., messages_removed: _Optional[int] = ..., tokens_after: _Optional[int] = ...) -> None: ...
