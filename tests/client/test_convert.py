"""memsvc_client.convert: plain values to contract messages and back, by the descriptors."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from memsvc_client import Message, results
from memsvc_client.convert import enum_label, from_proto, to_proto
from memsvc_client.rpcs import RPCS
from memsvc_client.v1 import error_memory_pb2 as epb
from memsvc_client.v1 import memory_pb2 as pb


def test_enums_are_given_by_their_short_name_in_any_case_or_by_full_name_or_number():
    for given in ("keyword", "KEYWORD", "Keyword", "MATCH_KEYWORD", pb.MATCH_KEYWORD):
        assert to_proto(pb.SearchRequest, {"match": given}).match == pb.MATCH_KEYWORD
    assert to_proto(pb.SearchRequest, {"time_range": "week"}).time_range == pb.TIME_RANGE_WEEK
    assert to_proto(pb.ResetRequest, {"mode": "all"}).mode == pb.RESET_MODE_ALL
    assert to_proto(epb.RecordErrorRequest, {"outcome": "abandoned"}).outcome == epb.OUTCOME_ABANDONED
    assert to_proto(pb.SearchRequest, {"match": "", "time_range": None}).match == pb.MATCH_UNSPECIFIED


def test_a_wrong_enum_name_says_which_names_exist():
    with pytest.raises(ValueError, match=r"SearchRequest.match must be one of semantic, keyword, hybrid, got 'kw'"):
        to_proto(pb.SearchRequest, {"match": "kw"})
    with pytest.raises(TypeError, match="must be one of"):
        to_proto(pb.SearchRequest, {"match": True})


def test_an_unknown_option_names_the_fields_there_are():
    with pytest.raises(TypeError, match=r"SearchRequest has no field 'matches' \(fields: session_id, query, match"):
        to_proto(pb.SearchRequest, {"matches": "keyword"})


def test_messages_are_dicts_results_or_protobuf_and_lists_take_any_iterable():
    request = to_proto(pb.AppendRequest, {"session_id": "s", "messages": (
        {"role": "user", "content": "a", "sender": "ada", "send_at_unix_nano": 5},
        Message(role="assistant", content="b"),
        pb.Message(role=pb.ROLE_USER, content="c"))})
    assert [(m.role, m.content) for m in request.messages] == [(1, "a"), (2, "b"), (1, "c")]
    assert request.messages[0].sender == "ada" and request.messages[0].send_at_unix_nano == 5
    with pytest.raises(TypeError, match="takes a list"):
        to_proto(pb.AppendRequest, {"messages": "hello"})


def test_results_come_back_with_proto_names_enum_names_and_none_for_unset_messages():
    reply = pb.GetContextResponse(window=[pb.Message(id=3, role=pb.ROLE_ASSISTANT, content="hi",
                                                     send_at_unix_nano=2**62)])
    context = from_proto(results.GetContextResponse, reply)
    assert context.window == [Message(id=3, role="assistant", content="hi", send_at_unix_nano=2**62)]
    assert context.turn_context is None and context.summary is None
    hit = from_proto(results.SearchHit, pb.SearchHit(source=pb.SOURCE_ARCHIVE, message=pb.Message(content="x")))
    assert hit.source == "archive" and hit.message is not None and hit.message.role == ""
    assert enum_label(pb.Message.DESCRIPTOR.fields_by_name["role"].enum_type, 9) == "unknown_9"


def test_an_empty_but_set_message_survives_the_round_trip():
    reply = pb.RemoveSessionResponse(deleted=pb.Deleted())
    typed = from_proto(results.RemoveSessionResponse, reply)
    assert typed.deleted == results.Deleted()
    assert to_proto(pb.RemoveSessionResponse, typed) == reply


@pytest.mark.parametrize("name", sorted(RPCS))
def test_every_result_has_every_field_of_its_reply_under_the_same_name(name):
    """The rule that keeps results and the contract in step: a field added to a reply needs a
    result attribute of the same name, or this fails."""
    def check(result_class: type, descriptor) -> None:
        attributes = {field.name for field in dataclasses.fields(result_class)}
        assert attributes == set(descriptor.fields_by_name), result_class.__name__
        hints = typing.get_type_hints(result_class)
        for field in descriptor.fields:
            if field.message_type is not None:
                nested = [arg for arg in typing.get_args(hints[field.name]) if dataclasses.is_dataclass(arg)]
                check(nested[0], field.message_type)
    rpc = RPCS[name]
    check(rpc.result, rpc.response.DESCRIPTOR)
