"""Disk errors and crashes at exact points inside writes, through a real server."""

import collections
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import msgspec
import pytest

from memsvc_client import MemsvcError
from tests.support import ServerProcess, wait_for


def failing(make_server, spec: str, *args: str, started_before: bool = False):
    """A server failing at `spec`'s points. `started_before`: from its second start, once the data
    directory holds its archive index (whose making is an atomic write of its own)."""
    if not started_before:
        return make_server(*args, env={"MEMSVC_FAILPOINTS": spec})
    server = make_server(*args)
    server.terminate()
    server.env["MEMSVC_FAILPOINTS"] = spec
    return server.start()


def contents(client, session_id: str) -> list[str]:
    return [m.content for m in client.get_context(session_id).window]


# An Append: its line into history.json (unsynced), its journal frame before and after the sync.
@pytest.mark.parametrize("point", ["history.write", "journal.write", "journal.synced"])
def test_a_disk_full_append_is_refused_changes_nothing_and_the_next_one_works(make_server, point):
    # hit 1 is the first append; hits 2 and 3 fail
    server = failing(make_server, f"{point}=enospc@2")
    with server.client() as client:
        client.append("s", [("user", "kept")])
        history = server.data_dir / "sessions/s/history.json"
        before = history.read_bytes()
        with pytest.raises(MemsvcError) as caught:
            client.append("s", [("user", "refused")])
        assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL")
        assert "free space" in caught.value.message
        assert history.read_bytes() == before
        client.append("s", [("user", "after space returned")])
        assert contents(client, "s") == ["kept", "after space returned"]
    server.restart()
    with server.client() as client:
        assert contents(client, "s") == ["kept", "after space returned"]


def test_an_io_error_is_unavailable(make_server):
    server = failing(make_server, "journal.write=eio@1")
    with server.client() as client, pytest.raises(MemsvcError) as caught:
        client.append("s", [("user", "x")])
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.UNAVAILABLE, "STORAGE_ERROR")


@pytest.mark.parametrize("point", ["history.write", "journal.write", "journal.synced"])
def test_kill_inside_an_append_keeps_every_acknowledged_one(make_server, point):
    server = failing(make_server, f"{point}=kill@6")
    acknowledged = []
    with server.client() as client:
        for index in range(10):
            try:
                client.append("s", [("user", f"m{index}"), ("assistant", f"r{index}")])
            except MemsvcError:
                break
            acknowledged.append(f"m{index}")
    assert acknowledged == [f"m{index}" for index in range(5)]
    server.process.wait()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        stored = contents(client, "s")
    users = [text for text in stored if text.startswith("m")]
    # the sixth was never acknowledged: it may be there (written, not yet synced) or not, but whole
    assert users[:5] == acknowledged and users in (acknowledged, acknowledged + ["m5"])
    assert len(stored) == 2 * len(users)


@pytest.mark.parametrize("point", ["lifecycle.compact.flushed", "durable.atomic_write.synced",
                                   "durable.atomic_write.renamed"])
def test_kill_inside_a_compaction_loses_nothing(make_server, point):
    server = failing(make_server, f"{point}=kill@1", "--max-history-messages", "2", started_before=True)
    with server.client() as client:
        for index in range(6):
            client.append("s", [("user", f"k{index}x"), ("assistant", "ok")])
        with pytest.raises(MemsvcError):
            client.compact("s")
    server.process.wait()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        client.compact("s")
        for index in range(6):
            hits = client.search("s", f"k{index}x", match="keyword").hits
            assert [h.message.content for h in hits] == [f"k{index}x"], index
    assert not list((server.data_dir / "sessions/s").glob(".*.tmp"))


def test_archive_commit_failures_are_retried_without_loss(make_server):
    server = failing(make_server, "archive.commit=eio*3", "--max-history-messages", "2")
    with server.client() as client:
        for index in range(4):
            client.append("s", [("user", f"a{index}x"), ("assistant", "ok")])
        assert client.compact("s", timeout=30).removed == 6
        for index in range(4):
            assert len(client.search("s", f"a{index}x", match="keyword").hits) == 1


@pytest.fixture
def small_disk(tmp_path: Path):
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_really_full_disk_refuses_appends_and_recovers_when_space_returns(make_server, small_disk):
    server = make_server(directory=small_disk / "data")
    filler = small_disk / "filler"
    with server.client() as client:
        client.append("s", [("user", "before the disk filled")])
        with open(filler, "wb") as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError:
                pass
        refused = 0
        for index in range(20):
            try:
                client.append("s", [("user", f"big {index} " + "x" * 200_000)])
            except MemsvcError as error:
                assert (error.code, error.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL")
                refused += 1
        assert refused > 0
        history = server.data_dir / "sessions/s/history.json"
        decoded = msgspec.json.decode(history.read_bytes())  # still a valid JSON array
        assert decoded[0]["content"] == "before the disk filled"
        os.remove(filler)
        client.append("s", [("user", "space is back")])
        assert contents(client, "s")[-1] == "space is back"
    server.restart()
    with server.client() as client:
        stored = contents(client, "s")
        assert stored[0] == "before the disk filled" and stored[-1] == "space is back"
        assert len(stored) == 2 + 20 - refused


def test_a_hung_embedding_endpoint_blocks_no_append_or_read(make_server):
    from tests.support.embedding_server import EmbeddingServer

    with EmbeddingServer(dimension=32) as endpoint:
        endpoint.delay = 30.0  # every embedding request hangs far past the calls below
        server = make_server("--embedder", "openai", "--embedding-base-url", endpoint.base_url,
                             "--embedding-dimensions", "32", "--embedding-model", "slow")
        with server.client(timeout=5) as client:
            for index in range(5):
                client.append("s", [("user", f"slow{index}x question"), ("assistant", "answer")])
            assert len(client.get_context("s").window) == 10
            assert len(client.search("s", "slow3x", match="keyword").hits) == 1
            assert client.compact("s").removed == 0
        endpoint.delay = 0.0
        server.kill()  # do not wait for the hung requests to drain


def test_a_hung_embedding_endpoint_does_not_hold_error_memory_lookups(make_server):
    from tests.support.embedding_server import EmbeddingServer

    with EmbeddingServer(dimension=32) as endpoint:
        server = make_server("--embedder", "openai", "--embedding-base-url", endpoint.base_url,
                             "--embedding-dimensions", "32", "--embedding-model", "slow")
        with server.client(timeout=10) as client:
            client.record_error("shell", "permission denied writing /etc/hosts", "use sudo")
            endpoint.delay = 60.0
            for _ in range(3):  # each answers by keywords within the bounded wait
                found = client.lookup_errors("shell", "permission denied writing /etc/passwd")
                assert [record.action for record in found.records] == ["use sudo"]
            client.record_error("shell", "disk quota exceeded", "clean the cache")
            assert len(client.search_errors("quota").records) == 1
        endpoint.delay = 0.0
        server.kill()


def tokens_found(client, session_id: str, tokens: list[str]) -> list[int]:
    return [sum(token in hit.message.content.split()
                for hit in client.search(session_id, token, match="keyword", limit=32).hits)
            for token in tokens]


@pytest.mark.parametrize("action", ["reset", "remove"])
@pytest.mark.parametrize(("point", "compacted", "done"), [
    ("durable.atomic_write.synced", False, False),  # the intent's temp file written, not renamed: never recorded
    ("durable.atomic_write.renamed", False, True),  # the intent recorded
    ("lifecycle.clear.intended", True, True),
    ("archive.cleared", True, True),  # the archive's delete committed, its cutoffs not yet rewritten
    ("lifecycle.clear.derived", True, True),  # every derived store cleared, history.json still there
])
def test_a_reset_or_removal_killed_part_way_is_done_in_full_or_not_at_all(make_server, action, point, compacted,
                                                                         done):
    server = failing(make_server, f"{point}=kill@1", "--max-history-messages", "2", started_before=True)
    tokens = [f"t{index}x" for index in range(6)]
    with server.client() as client:
        for token in tokens:
            client.append("s", [("user", f"about {token}"), ("assistant", "ok")])
            if compacted and token == tokens[3]:
                assert client.compact("s").removed == 6  # some messages only in the archive from here
        with pytest.raises(MemsvcError):
            client.reset("s") if action == "reset" else client.remove_session("s")
    server.process.wait()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        if not done:
            assert tokens_found(client, "s", tokens) == [1] * len(tokens)
            assert len(client.get_context("s").window) == 2
            return
        assert tokens_found(client, "s", tokens) == [0] * len(tokens)
        assert client.get_context("s").window == []
        if action == "remove":
            assert [info.session_id for info in client.list_sessions().sessions] == []
            assert client.append("s", [("user", "a new session")]).messages[0].id == 1
        else:
            assert client.append("s", [("user", "after")]).messages[0].id == 2 * len(tokens) + 1
    assert not list((server.data_dir / "sessions").glob(".intent-*"))


@pytest.mark.parametrize(("point", "compacted", "done"), [
    ("durable.atomic_write.synced=kill@1", False, False),  # the intent's temp file written, not renamed
    ("durable.atomic_write.renamed=kill@1", False, True),  # the intent recorded
    ("lifecycle.delete.intended=kill@1", True, True),
    ("archive.deleted=kill@1", True, True),  # the archive's delete committed
    ("lifecycle.delete.derived=kill@1", True, True),  # the vectors told, history.json untouched
    ("durable.atomic_write.renamed=kill@2", False, True),  # .next_id raised, history.json not yet rewritten
])
def test_a_deletion_killed_part_way_is_done_in_full_or_not_at_all(make_server, point, compacted, done):
    server = failing(make_server, point, "--max-history-messages", "2", started_before=True)
    tokens = [f"t{index}x" for index in range(6)]
    with server.client() as client:
        for token in tokens:
            client.append("s", [("user", f"about {token}"), ("assistant", "ok")])
            if compacted and token == tokens[3]:
                assert client.compact("s").removed == 6  # message 1 only in the archive from here
        wait_for(lambda: client.search("s", "about", include_window=True).unsearched == 0)
        with pytest.raises(MemsvcError):
            client.delete_messages("s", [1, 11, 12])  # about t0x, about t5x and its "ok"
    server.process.wait()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        window = [m.id for m in client.get_context("s").window]
        best = [hit.message.id for hit in client.search("s", "about t5x", limit=1, include_window=True).hits
                if not hit.is_context]
        if not done:
            assert tokens_found(client, "s", tokens) == [1] * len(tokens)
            assert window == [11, 12] and best == [11]
            return
        assert tokens_found(client, "s", tokens) == [0, 1, 1, 1, 1, 0]
        assert window == [9, 10] and best not in ([], [11]), "no vector of a deleted message is found"
        assert client.append("s", [("user", "after")]).messages[0].id == 13
        assert client.delete_messages("s", [1, 11, 12]).messages == []
    assert not list((server.data_dir / "sessions").glob(".intent-*"))


def test_reset_racing_remove_session_answers_ok_or_not_found(make_server):
    server = make_server()
    outcomes: collections.Counter[str] = collections.Counter()
    with server.client() as first, server.client() as second, ThreadPoolExecutor(2) as pool:
        for round_ in range(40):
            first.append("race", [("user", f"round {round_}"), ("assistant", "ok")])
            start = threading.Barrier(2)

            def race(call, start: threading.Barrier = start) -> str:
                start.wait()
                try:
                    call()
                    return "OK"
                except MemsvcError as error:
                    return f"{error.code.name} {error.reason}"

            outcomes.update(pool.map(race, [lambda: first.reset("race"), lambda: second.remove_session("race")]))
    assert set(outcomes) <= {"OK", "NOT_FOUND SESSION_NOT_FOUND"}, outcomes


def test_sigterm_ends_the_server_within_the_grace_even_with_a_call_stuck_in_a_thread(make_server, llm_server):
    release = threading.Event()
    llm_server.script("sum", lambda request: (release.wait(60), "never read")[1])
    server = make_server("--llm-base-url", llm_server.base_url, "--summary-model", "sum",
                         "--llm-timeout-seconds", "120", "--llm-max-retries", "0", "--shutdown-grace-seconds", "2")
    with server.client() as client:
        client.append("s", [("user", "q"), ("assistant", "a")])
        stuck = threading.Thread(target=lambda: pytest.raises(MemsvcError, client.summarize, "s", timeout=90))
        stuck.start()
        wait_for(lambda: llm_server.calls("sum"), timeout=30)
        try:
            # The thread waiting on the LLM used to hold the exit for the whole llm_timeout_seconds.
            assert server.terminate(timeout=2 + 10) in (0, 1)
        finally:
            release.set()
            stuck.join()
    assert server.logged("stopping")


def test_a_start_that_hangs_is_reported_within_the_start_timeout(tmp_path: Path):
    # Making the archive index at a first start is an atomic write: held there for a minute.
    server = ServerProcess(tmp_path / "data", env={"MEMSVC_FAILPOINTS": "durable.atomic_write.synced=delay:60000ms"})
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="did not start in time"):
            server.start(timeout=2)
        assert time.monotonic() - started < 30, "the harness waited for a line instead of its timeout"
        assert server.process is not None and server.process.poll() is None, "left running, as it hung"
    finally:
        server.kill()


def test_a_reset_during_a_vector_build_on_a_slow_disk_logs_no_failure(make_server):
    """The Reset kills the session's build while the embedding worker holds the files (a slow sync): the
    builder must see the session cleared, not a failed build to retry and report."""
    server = make_server("--vector-rebuild-rows", "64", "--vector-trees", "3000", "--max-history-messages", "2000",
                         env={"MEMSVC_FAILPOINTS": "durable.fsync=delay:100ms"})

    def building() -> bool:
        children = subprocess.run(["pgrep", "-P", str(server.process.pid), "-f", "memsvc.vectors.build"],
                                  capture_output=True, text=True).stdout
        return bool(children.strip())

    with server.client(timeout=60) as client:
        for round_ in range(3):
            client.append("s", [("user", f"round {round_} message {index} " * 8) for index in range(1000)])
            wait_for(building, timeout=30)
            client.reset("s")
        client.append("s", [("user", "after the resets, about zebras")])
        wait_for(lambda: client.search("s", "zebras", match="semantic", include_window=True).hits, timeout=30)
        hits = client.search("s", "round message", match="semantic", include_window=True, limit=32).hits
    assert [hit.message.content for hit in hits] == ["after the resets, about zebras"]
    assert not server.logged("vector build failed")
    assert not [line for line in server.log_lines if '"level":"error"' in line]
