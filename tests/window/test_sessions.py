from pathlib import Path

import pytest

from memsvc.app import SessionParts
from memsvc.core import config
from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.summary import rolling
from memsvc.window import history, legacy
from memsvc.window.incoming import NewMessage
from tests.support import session_parts


def make_sessions(tmp_path: Path, **overrides) -> SessionParts:
    settings = config.load({"data_dir": str(tmp_path / "data"), **overrides}, environ={})
    clock = iter(range(1_000, 10_000_000, 1_000))
    return session_parts(settings, clock=lambda: next(clock))[0]


def user(text: str, **fields) -> NewMessage:
    return NewMessage(role="user", content=text, **fields)


def test_ids_increase_and_survive_reopen(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    first = sessions.appender.append("s", [user("one"), NewMessage(role="assistant", content="two")])
    second = sessions.appender.append("s", [user("three")])
    assert [r.id for r in first.records + second.records] == [1, 2, 3]
    reopened = make_sessions(tmp_path)
    assert [r.id for r in reopened.appender.append("s", [user("four")]).records] == [4]
    assert [r.content for r in reopened.store.window("s")] == ["one", "two", "three", "four"]


def test_send_at_zero_means_now_and_given_times_are_kept(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    stored = sessions.appender.append("s", [user("a"), user("b", send_at=42)]).records
    assert stored[0].send_at == 1_000 and stored[1].send_at == 42


def test_window_is_the_last_n_without_pair_alignment(tmp_path: Path):
    sessions = make_sessions(tmp_path, max_history_messages=3)
    for index in range(7):
        sessions.appender.append("s", [user(f"m{index}")])
    assert [r.content for r in sessions.store.window("s")] == ["m4", "m5", "m6"]
    assert sessions.store.window("never-written") == []


def test_idempotency_key_replays_the_first_result_even_after_restart(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    first = sessions.appender.append("s", [user("a"), user("b")], idempotency_key="k")
    again = sessions.appender.append("s", [user("different")], idempotency_key="k")
    assert again.replayed and again.records == first.records
    reopened = make_sessions(tmp_path)
    assert reopened.appender.append("s", [user("c")], idempotency_key="k").records == first.records
    assert len(reopened.store.window("s")) == 2
    assert not sessions.appender.append("other", [user("a")], idempotency_key="k").replayed


@pytest.mark.parametrize("messages, reason", [
    ([], "NO_MESSAGES"),
    ([NewMessage(role="human", content="x")], "INVALID_ROLE"),
    ([user("   ")], "EMPTY_CONTENT"),
    ([user("x" * 101)], "MESSAGE_TOO_LARGE"),
    ([user("ok"), user("x", sender="s" * 300)], "SENDER_TOO_LONG"),
    ([user("x", send_at=-1)], "INVALID_TIME"),
    ([NewMessage(role="tool", content="x", payload="{not json")], "INVALID_PAYLOAD"),
    ([NewMessage(role="tool", content="x", payload='"' + "p" * 99 + '"')], "PAYLOAD_TOO_LARGE"),
])
def test_bad_messages_are_rejected_and_change_nothing(tmp_path: Path, messages, reason):
    sessions = make_sessions(tmp_path, max_message_bytes=100)
    sessions.appender.append("s", [user("kept")])
    before = (tmp_path / "data/sessions/s/history.json").read_bytes()
    with pytest.raises(InvalidArgument) as caught:
        sessions.appender.append("s", messages)
    assert caught.value.reason == reason
    assert (tmp_path / "data/sessions/s/history.json").read_bytes() == before


def test_too_many_messages(tmp_path: Path):
    sessions = make_sessions(tmp_path, max_messages_per_request=2)
    with pytest.raises(InvalidArgument) as caught:
        sessions.appender.append("s", [user("a")] * 3)
    assert caught.value.reason == "TOO_MANY_MESSAGES"
    assert not (tmp_path / "data/sessions/s").exists()


def test_legacy_header_gives_time_and_sender_when_send_at_is_zero(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    stored = sessions.appender.append("s", [user("sendAt: 2025-01-01 00:00:00, sender: ann\nhello"),
                                   user("sendAt: 2025-01-01 00:00:00\nkept", send_at=7)]).records
    assert (stored[0].content, stored[0].sender) == ("hello", "ann")
    assert stored[0].send_at == legacy.local_to_unix_nano("2025-01-01 00:00:00")
    assert stored[1].content.startswith("sendAt:") and stored[1].send_at == 7


def test_eviction_keeps_memory_bounded_and_data_intact(tmp_path: Path):
    sessions = make_sessions(tmp_path, max_open_sessions=2)
    for name in ("a", "b", "c", "a"):
        sessions.appender.append(name, [user(f"to {name}")])
    assert len(sessions.store._open) == 2
    assert [r.content for r in sessions.store.window("a")] == ["to a", "to a"]
    assert [r.id for r in sessions.store.window("b")] == [1]


def test_list_pages_in_id_order(tmp_path: Path):
    sessions = make_sessions(tmp_path, max_open_sessions=1)
    for name in ("c", "a", "b"):
        sessions.appender.append(name, [user("x"), user("y")])
    rolling.save(sessions.store.directory("b") / "summary.json",
                 rolling.Summary(key_decisions=["Do: test"], past_discussions=[]))
    page, token = sessions.lister.list_page(2, "")
    assert [info.session_id for info in page] == ["a", "b"] and token == "b"
    assert [info.message_count for info in page] == [2, 2]
    assert [info.has_summary for info in page] == [False, True]
    rest, token = sessions.lister.list_page(2, token)
    assert [info.session_id for info in rest] == ["c"] and token == ""
    assert rest[0].history_bytes == (tmp_path / "data/sessions/c/history.json").stat().st_size


def test_require_unknown_session(tmp_path: Path):
    with pytest.raises(NotFound) as missing:
        make_sessions(tmp_path).store.require("ghost")
    assert missing.value.reason == "SESSION_NOT_FOUND"


def test_torn_history_is_repaired_on_open(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    sessions.appender.append("s", [user("a")])
    sessions.appender.append("s", [user("b")])
    sessions.store.journal.close()  # checkpointed: the journal no longer holds the appends, so the torn one is gone
    path = tmp_path / "data/sessions/s/history.json"
    path.write_bytes(path.read_bytes()[:-7])
    reopened = make_sessions(tmp_path)
    assert [r.content for r in reopened.store.window("s")] == ["a"]
    assert reopened.appender.append("s", [user("c")]).records[0].id == 2
    assert [r.content for r in history.load(path).records] == ["a", "c"]


def test_acknowledged_appends_lost_from_history_are_replayed_from_the_journal(tmp_path: Path):
    """As after a power cut: history.json lost its unsynced tail, the journal did not."""
    sessions = make_sessions(tmp_path)
    sessions.appender.append("s", [user("a")])
    path = tmp_path / "data/sessions/s/history.json"
    synced = path.read_bytes()
    sessions.appender.append("s", [user("b"), user("c")])
    sessions.appender.append("t", [user("elsewhere")])
    path.write_bytes(synced[:-3])  # torn inside the first line, and the later lines gone
    (tmp_path / "data/sessions/t/history.json").unlink()
    reopened = make_sessions(tmp_path)
    assert [r.content for r in reopened.store.window("s")] == ["a", "b", "c"]
    assert [r.content for r in reopened.store.window("t")] == ["elsewhere"]
    assert history.decode(path.read_bytes()).canonical
    assert not list(path.parent.glob("*.damaged-*"))


def test_frames_before_a_rewrite_are_never_replayed_into_what_replaced_it(tmp_path: Path):
    sessions = make_sessions(tmp_path, max_history_messages=1)
    for text in ("a", "b", "c"):
        sessions.appender.append("s", [user(text)])
    with sessions.store.writing("s") as session:
        sessions.rewriter.trim(session, 2)
    sessions.appender.append("s", [user("d")])
    sessions.appender.append("gone", [user("x")])
    with sessions.store.writing("gone") as session:
        sessions.rewriter.remove(session)
    reopened = make_sessions(tmp_path)
    assert [r.content for r in history.load(tmp_path / "data/sessions/s/history.json").records] == ["c", "d"]
    assert [r.content for r in reopened.store.window("s")] == ["c", "d"]
    assert not (tmp_path / "data/sessions/gone").exists()


def test_list_pages_only_the_sessions_whose_id_contains_the_filter(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    for name in ("deploy-a", "Deploy-b", "chat-1", "redeploy", "deploy-c"):
        sessions.appender.append(name, [user("x")])
    first, token = sessions.lister.list_page(2, "", "DEPLOY")
    assert [info.session_id for info in first] == ["Deploy-b", "deploy-a"] and token == "deploy-a"
    rest, token = sessions.lister.list_page(2, token, "DEPLOY")
    assert [info.session_id for info in rest] == ["deploy-c", "redeploy"] and token == ""
    assert sessions.lister.list_page(10, "", "nothing")[0] == []
    assert len(sessions.lister.list_page(10, "")[0]) == 5


def test_a_payload_nested_past_the_decoders_depth_is_invalid_not_an_internal_error(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    with pytest.raises(InvalidArgument) as caught:
        sessions.appender.append("s", [NewMessage(role="tool", content="x", payload="[" * 5000 + "]" * 5000)])
    assert caught.value.reason == "INVALID_PAYLOAD"


def test_roles_and_payloads_are_kept_exactly_and_history_stays_one_append_per_line(tmp_path: Path):
    payload = '{\n  "tool_calls": [{"id": "call_1", "args": {"city": "Zürich \\u00e9"}}],\n  "n": 1.50\n}'
    messages = [NewMessage(role="system", content="be brief"), user("weather?"),
                NewMessage(role="assistant", content="get_weather(Zürich)", payload=payload),
                NewMessage(role="tool", content="sunny", payload='"plain string"')]
    sessions = make_sessions(tmp_path)
    sessions.appender.append("s", messages[:2])
    sessions.appender.append("s", messages[2:])
    reopened = make_sessions(tmp_path).store.window("s")
    assert [(r.role, r.content, r.payload) for r in reopened] == [
        (m.role, m.content, m.payload) for m in messages]
    lines = (tmp_path / "data/sessions/s/history.json").read_bytes().split(b"\n")
    assert len(lines) == 5 and lines[0] == b"[" and lines[3] == b"]", "two appends, two lines"
    assert b'"payload"' in lines[2] and b'"payload"' not in lines[1], "a record without a payload has no key"


def test_drop_deletes_records_and_later_ids_never_repeat(tmp_path: Path):
    sessions = make_sessions(tmp_path)
    sessions.appender.append("s", [user("a"), user("b"), user("c")], idempotency_key="k")
    with sessions.store.writing("s") as session:
        removed = sessions.rewriter.drop(session, {2, 3}, next_id=session.next_id)
    assert [r.content for r in removed] == ["b", "c"]
    assert [r.content for r in sessions.store.window("s")] == ["a"]
    assert sessions.appender.append("s", [user("d")]).records[0].id == 4, "ids 2 and 3 are never given again"
    reopened = make_sessions(tmp_path)
    assert [(r.id, r.content) for r in reopened.store.window("s")] == [(1, "a"), (4, "d")]
    with reopened.store.writing("s") as session:
        reopened.rewriter.drop(session, {4}, next_id=session.next_id)
    assert make_sessions(tmp_path).appender.append("s", [user("e")]).records[0].id == 5
    # the idempotency key still replays what is left of its Append, before and after a restart
    replayed = make_sessions(tmp_path).appender.append("s", [user("x")], idempotency_key="k")
    assert [r.content for r in replayed.records] == ["a"]
