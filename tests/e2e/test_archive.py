"""Keyword search, compaction, reset and removal through a real server."""

import grpc
import pytest

from memsvc_client import MemsvcError
from tests.support import wait_for

pytestmark = pytest.mark.in_process


def keyword(client, session_id, query, **options):
    return client.search(session_id, query, match="keyword", **options).hits


def pair(client, session_id, user_text, reply="noted"):
    return client.append(session_id, [("user", user_text), ("assistant", reply)])


def test_keyword_search_finds_each_message_once_across_an_auto_compaction(make_server):
    # 20 KiB budget: the history compacts every few dozen messages.
    server = make_server("--max-history-bytes", "20000", "--max-message-bytes", "4000")
    with server.client() as client:
        for index in range(120):
            pair(client, "s", f"turn {index}: the sandbox needs package p{index}x " + "padding " * 20)
        history = server.data_dir / "sessions/s/history.json"
        wait_for(lambda: history.stat().st_size <= 20000)
        for index in (0, 7, 60, 119):
            hits = keyword(client, "s", f"p{index}x", limit=32)
            assert [h.message.content.split(":")[0] for h in hits] == [f"turn {index}"]
        sources = {h.source for i in (0, 119) for h in keyword(client, "s", f"p{i}x")}
        assert sources == {"archive", "recent"}
        all_hits = keyword(client, "s", "sandbox", limit=32)
        assert len(all_hits) == 32 and len({h.message.id for h in all_hits}) == 32


@pytest.mark.parametrize("content, query", [
    ("我們在沙盒裡測試新的部署流程", "沙盒"),
    ("明日はサンドボックスでテストします", "サンドボックス"),
    ("The Sandbox deployment failed on Friday", "sandbox"),
    ("The Sandbox deployment failed on Friday", "DEPLOY friday"),
    ("混合 text: 部署到 staging 環境", "staging 部署"),
])
def test_any_script_is_found_when_recent_and_when_archived(client, content, query):
    pair(client, "s", content)
    recent = keyword(client, "s", query)
    assert [(h.message.content, h.source) for h in recent] == [(content, "recent")]
    for index in range(20):
        pair(client, "s", f"filler {index}")
    assert client.compact("s").removed == 26
    archived = keyword(client, "s", query)
    assert [(h.message.content, h.source) for h in archived] == [(content, "archive")]


def test_role_name_is_not_searchable_and_absent_words_find_nothing(client):
    pair(client, "s", "hello there", reply="general kenobi")
    assert keyword(client, "s", "assistant") == []
    assert keyword(client, "s", "user") == []
    assert keyword(client, "s", "沙盒") == []
    assert [h.message.content for h in keyword(client, "s", "kenobi")] == ["general kenobi"]


def test_multi_word_ranking_prefers_messages_with_more_of_the_words(client):
    pair(client, "s", "deployment notes for later")
    pair(client, "s", "we deploy on friday after lunch")
    pair(client, "s", "friday lunch")
    hits = keyword(client, "s", "deploy friday")
    assert hits[0].message.content == "we deploy on friday after lunch"
    assert {h.message.content for h in hits[1:]} == {"deployment notes for later", "friday lunch"}


def test_time_range_and_limit(client):
    day = 86_400 * 10**9
    import time

    now = time.time_ns()
    client.append("s", [dict(role="user", content="old sandbox", send_at_unix_nano=now - 40 * day),
                        dict(role="user", content="week sandbox", send_at_unix_nano=now - 3 * day),
                        dict(role="user", content="today sandbox", send_at_unix_nano=now)])
    def contents(**options):
        return sorted(h.message.content for h in keyword(client, "s", "sandbox", **options))
    assert contents() == ["old sandbox", "today sandbox", "week sandbox"]
    assert contents(time_range="week") == ["today sandbox", "week sandbox"]
    assert contents(time_range="day") == ["today sandbox"]
    assert contents(since_unix_nano=now - 50 * day, until_unix_nano=now - day) == ["old sandbox", "week sandbox"]
    assert len(keyword(client, "s", "sandbox", limit=1)) == 1


@pytest.mark.parametrize("options, reason", [
    ({"limit": 33}, "INVALID_LIMIT"),
    ({"match": 9}, "INVALID_ENUM"),
    ({"time_range": 42}, "INVALID_ENUM"),
    ({"since_unix_nano": 10, "until_unix_nano": 5}, "INVALID_TIME_RANGE"),
])
def test_bad_search_requests(client, options, reason):
    pair(client, "s", "x")
    request = {"match": "keyword", **options}
    with pytest.raises(MemsvcError) as caught:
        client.search("s", "x", **{k: v for k, v in request.items() if k != "match"}, match=request["match"])
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


def test_empty_keyword_query(client):
    pair(client, "s", "x")
    with pytest.raises(MemsvcError) as caught:
        keyword(client, "s", " ?! ")
    assert caught.value.reason == "EMPTY_QUERY"


def test_manual_compact_keeps_the_window_on_a_pair_boundary(make_server):
    server = make_server("--max-history-messages", "5")
    with server.client() as client:
        for index in range(10):
            pair(client, "s", f"q{index}", reply=f"a{index}")
        first_kept = client.search("s", "q7", match="keyword").hits[0].message
        result = client.compact("s")
        # keeping exactly 5 would cut between q7 and a7: the cut moves back to keep the pair whole
        assert result.removed == 14 and result.start_at_unix_nano == first_kept.send_at_unix_nano
        assert client.list_sessions().sessions[0].message_count == 6
        assert [m.content for m in client.get_context("s").window] == ["a7", "q8", "a8", "q9", "a9"]
        assert client.compact("s").removed == 0


def test_reset_and_remove_reach_every_store(client):
    for index in range(5):
        pair(client, "s", f"secret sandbox {index}")
    for index in range(20):
        pair(client, "s", f"filler {index}")
    client.compact("s")
    assert keyword(client, "s", "sandbox")
    reset = client.reset("s", "all").deleted
    assert reset.history_messages == 16 and reset.archived_messages == 50
    assert keyword(client, "s", "sandbox") == [] and list(client.get_context("s").window) == []
    again = pair(client, "s", "after reset sandbox")
    assert again.messages[0].id == 51  # ids never repeat in a session
    removed = client.remove_session("s").deleted
    assert removed.history_messages == 2 and removed.archived_messages == 2
    assert keyword(client, "s", "sandbox") == []
    with pytest.raises(MemsvcError) as caught:
        client.remove_session("s")
    assert caught.value.code == grpc.StatusCode.NOT_FOUND


@pytest.mark.as_process
def test_kill_between_append_and_archive_commit_loses_nothing(make_server):
    # Commits wait an hour: nothing reaches the archive before the kill.
    server = make_server("--max-history-messages", "2", "--archive-commit-seconds", "3600")
    with server.client() as client:
        for index in range(30):
            pair(client, "s", f"unique{index}x words")
    server.kill()
    server.start()
    with server.client() as client:
        client.compact("s")
        for index in range(30):
            hits = keyword(client, "s", f"unique{index}x")
            source = "recent" if index == 29 else "archive"  # the last pair is the window
            assert [(h.message.content, h.source) for h in hits] == [(f"unique{index}x words", source)]


def test_messages_compacted_out_before_a_summary_run_are_summarized_once(make_server, llm_server):
    from tests.support.llm_server import summary_reply

    server = make_server("--llm-base-url", llm_server.base_url, "--summary-model", "sum", "--llm-max-retries", "0",
                         "--max-history-messages", "2")
    llm_server.script("sum", summary_reply(["Do: keep pairs"]), summary_reply(["Do: keep pairs"]))
    with server.client() as client:
        pair(client, "s", "first question alpha")
        assert client.summarize("s").count == 2
        for index in range(5):
            pair(client, "s", f"later question q{index}z")
        assert client.compact("s").removed == 10  # four unsummarized pairs leave history.json
        assert client.summarize("s").count == 10
    prompt = llm_server.calls("sum")[1].user
    assert all(f"q{index}z" in prompt for index in range(5))
    assert "alpha" not in prompt  # summarized once, in the first run
