"""Proto <-> domain conversions: fields and enums map both ways; values only
the wire can carry (unknown enum numbers) are refused with INVALID_ENUM."""

from __future__ import annotations

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.records import ROLES, Record
from memsvc.lifecycle.clearing import Deleted
from memsvc.rpc import convert
from memsvc.search.query import Hit
from memsvc.summary.rolling import CurrentDiscussion, PastDiscussion, Summary
from memsvc_client.v1 import memory_pb2 as pb


def test_every_domain_role_has_a_wire_role_and_back():
    for name in ROLES:
        wire = convert.message(Record(id=1, role=name, content="x")).role
        assert convert.new_message(pb.Message(role=wire, content="x")).role == name


def test_an_unset_or_unknown_role_reaches_the_domain_as_empty_to_be_refused_there():
    assert convert.new_message(pb.Message(content="x")).role == ""
    assert convert.new_message(pb.Message(role=77, content="x")).role == ""


def test_a_message_keeps_every_field_both_ways():
    wire = pb.Message(role=pb.ROLE_ASSISTANT, content="hi", sender="bot", send_at_unix_nano=42, embedding=[0.5, 1])
    new = convert.new_message(wire)
    assert (new.role, new.content, new.sender, new.send_at, new.embedding) == ("assistant", "hi", "bot", 42, [0.5, 1])
    back = convert.message(Record(id=7, role="assistant", content="hi", sender="bot", send_at=42))
    assert (back.id, back.role, back.content, back.sender, back.send_at_unix_nano) == (7, pb.ROLE_ASSISTANT, "hi",
                                                                                      "bot", 42)


def test_a_search_request_becomes_a_query_with_domain_names():
    query = convert.query(pb.SearchRequest(session_id="s", query="q", match=pb.MATCH_HYBRID, limit=5,
                                           time_range=pb.TIME_RANGE_WEEK, since_unix_nano=1, until_unix_nano=2,
                                           include_window=True, query_embedding=[1.0]))
    assert (query.session_id, query.text, query.match, query.limit, query.time_range) == ("s", "q", "hybrid", 5, "7d")
    assert (query.since, query.until, query.include_window, query.vector) == (1, 2, True, [1.0])
    unnamed = convert.query(pb.SearchRequest(session_id="s", query="q"))
    assert (unnamed.match, unnamed.mode) == (None, "hybrid")  # unspecified: the domain's default
    embedding_only = convert.query(pb.SearchRequest(session_id="s", query_embedding=[1.0]))
    assert embedding_only.mode == "semantic"  # nothing for keyword search to read


@pytest.mark.parametrize("request_fields, field", [({"match": 9}, "match"), ({"time_range": 99}, "time_range")])
def test_unknown_enum_numbers_are_refused(request_fields, field):
    with pytest.raises(InvalidArgument, match=field) as refused:
        convert.query(pb.SearchRequest(session_id="s", **request_fields))
    assert refused.value.reason == "INVALID_ENUM"


def test_a_hit_a_summary_and_a_deletion_count_convert_whole():
    hit = convert.hit(Hit(Record(id=3, role="user", content="c"), "archive", score=1.5, is_context=True, run=2))
    assert (hit.message.id, hit.source, hit.score, hit.is_context, hit.run) == (3, pb.SOURCE_ARCHIVE, 1.5, True, 2)
    summary = convert.summary(Summary(key_decisions=["Do: a"], past_discussions=[PastDiscussion(topic="p")],
                                      current_discussion=CurrentDiscussion(topic="c", perspectives=["x", "y"]),
                                      extra={"mood": 1}))
    assert list(summary.key_decisions) == ["Do: a"] and summary.past_discussions[0].topic == "p"
    assert summary.current_discussion.perspectives == "x\ny" and '"mood": 1' in summary.json
    assert not convert.summary(Summary(key_decisions=["Do: a"])).HasField("current_discussion")
    deleted = convert.deleted(Deleted(history_messages=1, archived_messages=2, vectors=3, summary=True))
    assert (deleted.history_messages, deleted.archived_messages, deleted.vectors, deleted.summary) == (1, 2, 3, True)
