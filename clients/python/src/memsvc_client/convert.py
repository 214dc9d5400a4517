"""Plain Python values to contract messages and back, driven by the messages' descriptors.

Owns the mapping rules: an enum is given and returned as its lower-case name without the
enum's prefix ("keyword" for MATCH_KEYWORD, "" for *_UNSPECIFIED; the full name or the number
is accepted too), a nested message as a dict, a result dataclass or a protobuf message, a
repeated field as any iterable, None as unset. A field the contract gains needs no code here:
options pass through by their proto names. Must never make calls or know about RPCs.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, TypeVar

from google.protobuf import descriptor_pool
from google.protobuf.message import Message as ProtoMessage

Result = TypeVar("Result")
# protobuf's stubs type descriptors as a union of the upb and pure-Python classes: read them as Any.
EnumDescriptor: TypeAlias = Any
FieldDescriptor: TypeAlias = Any


def enum_prefix(enum: EnumDescriptor) -> str:
    """"TIME_RANGE_" for TimeRange: buf's rule that every value starts with the enum's name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_label(enum: EnumDescriptor, number: int) -> str:
    value = enum.values_by_number.get(number)
    if value is None:  # sent by a server with a newer contract
        return f"unknown_{number}"
    if value.name.endswith("_UNSPECIFIED"):
        return ""
    return value.name.removeprefix(enum_prefix(enum)).lower()


def enum_labels(enum: EnumDescriptor) -> list[str]:
    return [label for value in enum.values if (label := enum_label(enum, value.number))]


def enum_number(enum: EnumDescriptor, value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(f"{field} must be one of {', '.join(enum_labels(enum))}, got {value!r}")
    if isinstance(value, int):
        return value
    if value == "":
        return 0
    name = value.strip().upper().replace("-", "_").replace(" ", "_")
    for candidate in (enum_prefix(enum) + name, name):
        if candidate in enum.values_by_name:
            return enum.values_by_name[candidate].number
    raise ValueError(f"{field} must be one of {', '.join(enum_labels(enum))}, got {value!r}")


def fields_of(value: object) -> Mapping[str, Any]:
    """A dict, or a result dataclass seen as one (its fields, not deep-copied)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"expected a dict or a memsvc result, got {type(value).__name__}")


def fill(message: ProtoMessage, values: Mapping[str, Any]) -> ProtoMessage:
    """Set `values` (proto field names) on `message`; None leaves a field unset."""
    descriptor = message.DESCRIPTOR
    for name, value in values.items():
        if value is None:
            continue
        field = descriptor.fields_by_name.get(name)
        if field is None:
            known = ", ".join(descriptor.fields_by_name)
            raise TypeError(f"{descriptor.name} has no field {name!r} (fields: {known})")
        where = f"{descriptor.name}.{name}"
        if _is_repeated(field):
            if isinstance(value, str | bytes) or not isinstance(value, Iterable):
                raise TypeError(f"{where} takes a list, got {type(value).__name__}")
            target = getattr(message, name)
            for item in value:
                if field.message_type is not None:
                    _fill_message(target.add(), item)
                else:
                    target.append(_scalar(field, item, where))
        elif field.message_type is not None:
            _fill_message(getattr(message, name), value)
        else:
            setattr(message, name, _scalar(field, value, where))
    return message


def _fill_message(target: ProtoMessage, value: object) -> None:
    if isinstance(value, ProtoMessage):
        target.CopyFrom(value)
    else:
        target.SetInParent()  # an empty dict still sets the field
        fill(target, fields_of(value))


def _scalar(field: FieldDescriptor, value: object, where: str) -> object:
    if field.enum_type is not None:
        return enum_number(field.enum_type, value, where)
    return value


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def to_proto(message_class: type[ProtoMessage], values: object) -> ProtoMessage:
    """A new `message_class` from a dict or a result dataclass."""
    return fill(message_class(), fields_of(values))


def from_proto(result_class: type[Result], message: ProtoMessage) -> Result:
    """The result dataclass of `message`, attribute by attribute (by proto field name)."""
    values: dict[str, Any] = {}
    for name, kind, nested, labels in _plan(typing.cast(type, result_class), message.DESCRIPTOR.full_name):
        raw = getattr(message, name)
        if kind == _SCALAR:
            values[name] = raw
        elif kind == _ENUM:
            values[name] = labels.get(raw) or (f"unknown_{raw}" if raw else "")
        elif kind == _MESSAGES:
            values[name] = [from_proto(nested, item) for item in raw]
        elif kind == _MESSAGE:
            values[name] = from_proto(nested, raw) if message.HasField(name) else None
        else:
            values[name] = list(raw)
    return result_class(**values)


# How a field is read (plain ints: this runs for every field of every reply).
_SCALAR, _LIST, _ENUM, _MESSAGE, _MESSAGES = range(5)


@functools.cache
def _plan(result_class: type, message_name: str) -> list[tuple[str, int, Any, dict[int, str]]]:
    """How to read each field of a result class from one message type, worked out once: a reply is
    converted on every call, so nothing here runs per call."""
    descriptor: Any = descriptor_pool.Default().FindMessageTypeByName(message_name)
    hints = typing.get_type_hints(result_class)
    plan = []
    for field in dataclasses.fields(result_class):
        proto = descriptor.fields_by_name.get(field.name)
        if proto is None:  # a field this contract version does not have yet
            continue
        inner = [arg for arg in _unwrap(hints[field.name]) if isinstance(arg, type) and dataclasses.is_dataclass(arg)]
        labels: dict[int, str] = {}
        if inner:
            kind = _MESSAGES if _is_repeated(proto) else _MESSAGE
        elif proto.enum_type is not None:
            kind = _ENUM
            labels = {value.number: enum_label(proto.enum_type, value.number) for value in proto.enum_type.values}
        else:
            kind = _LIST if _is_repeated(proto) else _SCALAR
        plan.append((field.name, kind, inner[0] if inner else None, labels))
    return plan


def _unwrap(hint: object) -> tuple[object, ...]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) in (list, typing.Union):
        return tuple(arg for part in typing.get_args(hint) for arg in _unwrap(part))
    return (hint,)
