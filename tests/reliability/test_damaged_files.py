"""Damaged files under a real server: history.json, the archive's Tantivy index and cutoffs,
the summary cursor and last run's record, .next_id. Whatever is damaged is detected and said, nothing is erased,
and what can still be served is served."""

from __future__ import annotations

import collections
import json
import shutil
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from memsvc.archive import reindex
from memsvc_client import MemsvcError
from tests.support import ServerProcess, scrape, wait_for
from tests.support.llm_server import summary_reply

pytestmark = pytest.mark.in_process

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
FLAGS = ("--max-history-messages", "2", "--archive-commit-seconds", "0.05")


def talk(client, session_id: str, tokens: list[str]) -> None:
    for token in tokens:
        client.append(session_id, [("user", f"question {token}"), ("assistant", "noted")])


def found(client, session_id: str, token: str) -> int:
    hits = client.search(session_id, token, match="keyword", limit=32).hits
    return sum(token in hit.message.content.split() for hit in hits)


def refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value.code, caught.value.reason


@pytest.fixture
def archived(make_server):
    """A stopped server's data: session s with `old` tokens only in the archive, `new` ones in history.json."""
    server = make_server(*FLAGS)
    old, new = [f"old{n}x" for n in range(8)], [f"new{n}x" for n in range(6)]
    with server.client() as client:
        talk(client, "s", old)
        assert client.compact("s").removed == 14
        talk(client, "s", new)
        client.record_error("shell", "permission denied writing /etc/hosts", "use sudo")
    assert server.terminate() == 0
    return server, old, new


def index_dir(server: ServerProcess) -> Path:
    return reindex.index_dir(server.data_dir / ".store/archive", reindex.VERSION)


# -- history.json --------------------------------------------------------------------------------


def test_swapped_lines_in_history_keep_their_ids_and_nothing_is_lost(archived):
    server, old, new = archived
    history = server.data_dir / "sessions/s/history.json"
    lines = history.read_bytes().split(b"\n")
    lines[3], lines[5] = lines[5], lines[3]  # two whole Appends, each line starting with a comma
    history.write_bytes(b"\n".join(lines))
    server.start()
    with server.client() as client:
        ids = [m.id for m in client.get_context("s").window]
        repaired = server.logged("repaired damaged history")
        assert repaired and repaired[0]["ids_out_of_order"] is True
        assert len(list(history.parent.glob("history.json.damaged-*"))) == 1  # the original, kept aside
        assert ids == [27, 28]  # the ids they were stored with: none renumbered
        assert all(found(client, "s", token) == 1 for token in old + new)
        assert client.compact("s").removed == 12
        assert all(found(client, "s", token) == 1 for token in old + new)
        assert client.append("s", [("user", "after")]).messages[0].id == 29  # no id is ever reused


def test_a_garbage_next_id_is_said_and_ids_still_increase(make_server):
    server = make_server()
    with server.client() as client:
        client.append("s", [("user", "one"), ("assistant", "two")])
    server.terminate()
    (server.data_dir / "sessions/s/.next_id").write_bytes(b"\xffnot a number")
    server.start()
    with server.client() as client:
        assert client.append("s", [("user", "three")]).messages[0].id == 3
    warned = server.logged("unreadable .next_id left in place; ids continue after those in history.json")
    assert warned and warned[0]["path"].endswith("sessions/s/.next_id")


def test_a_history_that_is_a_directory_fails_only_its_own_session(make_server):
    server = make_server()
    with server.client() as client:
        client.append("good", [("user", "fine")])
        (server.data_dir / "sessions/bad").mkdir()
        (server.data_dir / "sessions/bad/history.json").mkdir()
        listed = {info.session_id: info.message_count for info in client.list_sessions().sessions}
        assert listed == {"bad": 0, "good": 1}
        assert refusal(lambda: client.get_context("bad")) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                               "HISTORY_UNREADABLE")
        assert [m.content for m in client.get_context("good").window] == ["fine"]


# -- the archive's index and cutoffs ---------------------------------------------------------------


def serves_all_but_the_archive(server: ServerProcess, new: list[str]) -> None:
    """History, error memory and health answer; what needs the archive is refused, saying why."""
    with server.client() as client:
        assert [m.content for m in client.get_context("s").window] == ["question new5x", "noted"]
        assert client.lookup_errors("shell", "permission denied writing /etc/passwd").records
        client.append("s", [("user", "still stored"), ("assistant", "yes")])
        for call in (lambda: client.search("s", new[0], match="keyword"), lambda: client.compact("s"),
                     lambda: client.reset("s"), lambda: client.remove_session("s")):
            assert refusal(call) == (grpc.StatusCode.FAILED_PRECONDITION, "ARCHIVE_DAMAGED")
        assert [m.content for m in client.get_context("s").window] == ["still stored", "yes"]
    assert server.health_status() == SERVING
    wait_for(lambda: server.health_status("memsvc.archive") == NOT_SERVING, timeout=10)


def test_a_deleted_meta_json_keeps_every_segment_and_the_archive_comes_back_with_it(archived):
    server, old, new = archived
    meta = index_dir(server) / "meta.json"
    saved = meta.read_bytes()
    meta.unlink()
    segments = sorted(path.name for path in index_dir(server).iterdir() if not path.name.startswith("."))
    server.start()
    damaged = server.logged("archive unusable: refusing what needs it, serving the rest")
    assert "meta.json is missing" in damaged[0]["problem"] and "meta.json" in damaged[0]["what_to_do"]
    serves_all_but_the_archive(server, new)
    assert server.terminate() == 0
    assert sorted(path.name for path in index_dir(server).iterdir() if not path.name.startswith(".")) == segments
    meta.write_bytes(saved)  # the operator puts it back
    server.start()
    with server.client() as client:
        assert all(found(client, "s", token) == 1 for token in old + new + ["still"])


def _zero_meta(index: Path) -> str:
    (index / "meta.json").write_bytes(b"")
    return "meta.json"


def _garbage_meta(index: Path) -> str:
    (index / "meta.json").write_bytes(b"{not json")
    return "meta.json"


def _deleted_segment_file(index: Path) -> str:
    victim = next(index.glob("*.store"))
    victim.unlink()
    return victim.name


@pytest.mark.parametrize("damage", [_zero_meta, _garbage_meta, _deleted_segment_file])
def test_an_index_that_cannot_be_opened_is_said_and_the_rest_is_served(archived, damage):
    server, old, new = archived
    named = damage(index_dir(server))
    server.start()  # starts (no traceback, no exit 1)
    damaged = server.logged("archive unusable: refusing what needs it, serving the rest")
    assert named in damaged[0]["problem"] and damaged[0]["what_to_do"]
    serves_all_but_the_archive(server, new)


def test_garbage_cutoffs_are_kept_aside_and_the_archive_serves_on(archived):
    server, old, new = archived
    cutoffs = server.data_dir / ".store/archive/cutoffs.json"
    cutoffs.write_bytes(b"\x00garbage")
    server.start()
    warned = server.logged("unreadable archive cutoffs kept aside; starting without them")
    assert warned and warned[0]["path"] == str(cutoffs)
    assert [path.read_bytes() for path in cutoffs.parent.glob("cutoffs.json.damaged-*")] == [b"\x00garbage"]
    with server.client() as client:
        assert all(found(client, "s", token) == 1 for token in old + new)
        assert client.compact("s").removed == 12
    assert server.health_status("memsvc.archive") == SERVING


@pytest.mark.as_process
def test_bytes_overwritten_in_a_segment_are_reported_and_shutdown_still_ends_in_time(archived):
    server, old, new = archived
    for path in index_dir(server).glob("*.store"):  # the stored messages: Tantivy opens them unchecked
        data = bytearray(path.read_bytes())
        data[20:60] = bytes(byte ^ 0xFF for byte in data[20:60])
        path.write_bytes(bytes(data))
    server.args += ["--metrics-listen", "127.0.0.1:0", "--shutdown-grace-seconds", "3"]
    server.start()
    with server.client(timeout=30) as client:
        # The first call that reaches the damage finds it; the files are checked, and from then on
        # everything that needs the archive is refused at once, nothing half done.
        assert refusal(lambda: client.reset("s")) == (grpc.StatusCode.FAILED_PRECONDITION, "ARCHIVE_DAMAGED")
        assert [m.content for m in client.get_context("s").window] == ["question new5x", "noted"]
        assert refusal(lambda: client.search("s", old[0], match="keyword")) == (
            grpc.StatusCode.FAILED_PRECONDITION, "ARCHIVE_DAMAGED")
        client.append("s", [("user", "after the damage")])
    damaged = server.logged("archive unusable: refusing what needs it, serving the rest")
    assert len(damaged) == 1 and "fails its checksum" in damaged[0]["problem"]
    wait_for(lambda: server.health_status("memsvc.archive") == NOT_SERVING, timeout=10)
    assert scrape(server)[("memsvc_archive_damaged", frozenset())] == 1
    failures = len(server.logged("archive commit failed; retrying"))
    time.sleep(2)
    assert len(server.logged("archive commit failed; retrying")) == failures <= 1  # no retrying the impossible
    assert server.terminate(timeout=3 + 10) == 0  # a writer retrying forever used to hold SIGTERM for good


# -- the summary cursor ------------------------------------------------------------------------------


def test_a_cursor_that_is_not_utf8_is_treated_as_damaged_summary_files_are(make_server, llm_server):
    server = make_server("--llm-base-url", llm_server.base_url, "--summary-model", "sum", "--llm-max-retries", "0")
    llm_server.script("sum", summary_reply(["Do: keep it short"]))
    with server.client(timeout=30) as client:
        client.append("s", [("user", "first"), ("assistant", "reply")])
        summarized = client.summarize("s")
        assert summarized.count == 2
        cursor = server.data_dir / "sessions/s/.summary_cursor"
        cursor.write_bytes(b"\xff\xfe\x00 not a time")
        read = client.get_summary("s")  # the summary, and no cursor: not INTERNAL
        assert read.summary == summarized.summary and read.cursor_unix_nano == 0
        client.append("s", [("user", "second"), ("assistant", "reply")])
        assert refusal(lambda: client.summarize("s")) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                          "SUMMARY_CURSOR_UNREADABLE")
    assert cursor.read_bytes() == b"\xff\xfe\x00 not a time"  # left in place for a person
    assert server.logged("unreadable .summary_cursor left in place")


@pytest.mark.parametrize("damage", [b"\xff\xfe not json", b'{"trigger": "job"}', b'{"outcome": 3}', b""])
def test_an_unreadable_last_run_record_reads_as_no_run_and_is_replaced_by_the_next(make_server, llm_server, damage):
    server = make_server("--llm-base-url", llm_server.base_url, "--summary-model", "sum", "--llm-max-retries", "0")
    llm_server.script("sum", summary_reply(["Do: keep it short"]))
    with server.client(timeout=30) as client:
        client.append("s", [("user", "first"), ("assistant", "reply")])
        record = server.data_dir / "sessions/s/.summary_run.json"
        record.write_bytes(damage)
        read = client.get_summary("s")  # no run, and nothing else lost: not INTERNAL
        assert read.last_run is None and read.summary is None
        # The log reaches the test through the server's stderr, a moment after the reply.
        wait_for(lambda: server.logged("unreadable summary run record left in place; shown as no run"))
        assert record.read_bytes() == damage
        assert client.summarize("s").count == 2
        assert client.get_summary("s").last_run.outcome == "summarized"


# -- the data directory itself -----------------------------------------------------------------------------


def test_a_data_directory_deleted_under_the_server_stops_every_write_and_says_so(make_server):
    server = make_server("--shutdown-grace-seconds", "3")
    with server.client() as client:
        client.append("s", [("user", "before"), ("assistant", "ok")])
        assert client.record_error("shell", "disk quota exceeded", "clean the cache").stored
        gone = server.data_dir.with_name("gone")
        server.data_dir.rename(gone)  # gone at once, then deleted
        shutil.rmtree(gone)
        refused = (grpc.StatusCode.UNAVAILABLE, "DATA_DIR_MISSING")
        assert refusal(lambda: client.record_error("web", "HTTP 403 from cloudflare", "send a UA")) == refused
        assert refusal(lambda: client.append("new-session", [("user", "x")])) == refused
        assert refusal(lambda: client.append("s", [("user", "x")])) == refused
        # Reads too, error memory's included: its open connection would still answer from the deleted file.
        for call in (lambda: client.compact("s"), lambda: client.reset("s"), lambda: client.remove_session("s"),
                     lambda: client.get_context("s"), lambda: client.list_sessions(),
                     lambda: client.list_errors(), lambda: client.search_errors("disk quota"),
                     lambda: client.lookup_errors("shell", "disk quota exceeded")):
            assert refusal(call) == refused
    wait_for(lambda: server.health_status() == NOT_SERVING, timeout=10)
    assert not server.data_dir.exists()  # nothing recreated a data directory behind the operator's back
    assert server.terminate(timeout=15) == 0
    assert all(line.startswith("{") for line in server.log_lines), "every line is JSON, no bare traceback"
    server.start()  # on an empty directory now: nothing claimed stored is missing, since nothing was
    with server.client() as client:
        assert not client.search_errors("cloudflare").records


def test_a_deleted_data_directory_is_logged_once_as_a_condition_not_on_every_retry(make_server):
    server = make_server()
    with server.client() as client:
        for session_id in ("a", "b", "temp-c"):  # embeddings still pending, and a temp- session to clean up
            client.append(session_id, [("user", f"message {index} " * 20) for index in range(200)])
    gone = server.data_dir.with_name("gone")
    server.data_dir.rename(gone)
    shutil.rmtree(gone)
    wait_for(lambda: server.health_status() == NOT_SERVING, timeout=10)
    # Past the next minute, when the temp-cleanup job runs, and past several of the vector worker's retries
    # (after 1, 2, 5 and 15 s): each of them used to log a traceback per attempt.
    now = time.time()
    time.sleep(max(20.0, 60 - now % 60 + 3))
    # Each condition once: a job's refusal is one per job and reason (two jobs may meet the gone directory).
    conditions = collections.Counter((entry["event"], entry.get("job"), entry.get("reason"))
                                     for line in list(server.log_lines)
                                     if (entry := json.loads(line))["level"] in ("error", "critical"))
    assert conditions and set(conditions.values()) == {1}, conditions
    errors = {event for event, _, _ in conditions}
    assert "job failed" not in errors and "vector worker failed" not in errors
    assert conditions["not serving", None, None] == 1


@pytest.mark.parametrize("content", ["\0\0\0", "\u200b\u200d\ufeff", " \u2060\t\n"])
def test_content_that_is_only_invisible_characters_is_empty(client, content):
    assert refusal(lambda: client.append("s", [("user", content)])) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                                      "EMPTY_CONTENT")
    assert not client.list_sessions().sessions


def test_a_torn_history_names_the_copy_it_kept_aside(archived):
    """Damage found at open is said once, as JSON, naming the kept copy and what was wrong."""
    server, old, new = archived
    history = server.data_dir / "sessions/s/history.json"
    history.write_bytes(history.read_bytes()[:-7])  # a torn last Append
    server.start()
    with server.client() as client:
        assert [m.content for m in client.get_context("s").window] == ["question new4x", "noted"]
    (entry,) = server.logged("repaired damaged history")
    assert (history.parent / entry["kept_copy"]).is_file() and entry["lines_dropped"] is True
    assert [record["id"] for record in json.loads(history.read_bytes())][-2:] == [25, 26]
