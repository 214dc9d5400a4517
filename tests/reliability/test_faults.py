"""Disk errors and crashes at exact points inside writes, through a real server."""

import os
import subprocess
from pathlib import Path

import grpc
import msgspec
import pytest

from memsvc_client import MemsvcError


def failing(make_server, spec: str, *args: str):
    return make_server(*args, env={"MEMSVC_FAILPOINTS": spec})


def contents(client, session_id: str) -> list[str]:
    return [m.content for m in client.get_context(session_id).window]


@pytest.mark.parametrize("point", ["durable.write_at.start", "durable.write_at.written", "durable.write_at.synced"])
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
    server = failing(make_server, "durable.write_at.written=eio@1")
    with server.client() as client, pytest.raises(MemsvcError) as caught:
        client.append("s", [("user", "x")])
    assert (caught.value.code, caught.value.reason) == (grpc.StatusCode.UNAVAILABLE, "STORAGE_ERROR")


@pytest.mark.parametrize("point", ["durable.write_at.written", "durable.write_at.synced"])
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
    server = failing(make_server, f"{point}=kill@1", "--max-history-messages", "2")
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
