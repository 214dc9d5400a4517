"""Moving an older archive (version 1 of the first releases, version 2 with payloads) to the current
index under a real server: keyword search finds the moved messages by the new analyzer and
ListMessages returns them, payloads byte for byte; a kill during the copy or right after the switch
loses nothing; a Reset interrupted before the move is completed on the new index; a disk that fills
during the copy keeps the old index and refuses only what needs the archive."""

from pathlib import Path

import grpc
import msgspec
import pytest

from memsvc.archive import reindex
from memsvc.core.records import Record
from memsvc.lifecycle.intents import Intent
from memsvc_client import Client, MemsvcError
from tests.support import ServerProcess
from tests.support.archives import FRAMEWORK, old_index, texts

pytestmark = pytest.mark.in_process

OLD = {"s": texts("we deployed the fixes", "ok"), "t": texts("deploying later"), "f": FRAMEWORK}


def old_data_dir(data_dir: Path, version: int) -> dict[str, list[Record]]:
    """A data directory as memsvc of `version` left it, every message compacted into the archive;
    what ListMessages must return of each session."""
    old_index(data_dir / ".store", version, OLD)
    for session, records in OLD.items():
        directory = data_dir / "sessions" / session
        directory.mkdir(parents=True)
        (directory / ".next_id").write_text(str(len(records) + 1))
    if version == 1:  # no payload field then
        return {session: [msgspec.structs.replace(r, payload="") for r in records] for session, records in OLD.items()}
    return OLD


def keyword(client: Client, session: str, query: str) -> list[str]:
    return [hit.message.content for hit in client.search(session, query, match="keyword").hits]


def listed(client: Client, session: str) -> list[tuple[int, str, str, int, str, bytes]]:
    return [(m.id, m.role, m.content, m.send_at_unix_nano, m.sender, m.payload_json.encode())
            for m in client.list_messages(session, page_size=100).messages]


def stored(records: list[Record]) -> list[tuple[int, str, str, int, str, bytes]]:
    return [(r.id, r.role, r.content, r.send_at, r.sender, r.payload.encode()) for r in records]


def archive_dirs(data_dir: Path) -> dict[str, bytes]:
    """Every file of every index directory, by path: what the archive holds on disk."""
    root = data_dir / ".store/archive"
    return {str(path.relative_to(root)): path.read_bytes() for path in root.glob("index*/*") if path.is_file()}


def index_dirs(data_dir: Path) -> list[str]:
    return sorted(path.name for path in (data_dir / ".store/archive").iterdir() if path.is_dir())


CURRENT = reindex.index_dir(Path(), reindex.VERSION).name


def assert_moved(server: ServerProcess, expected: dict[str, list[Record]]) -> None:
    with server.client() as client:
        assert keyword(client, "s", "deploys") == ["we deployed the fixes"]
        assert keyword(client, "t", "deploys") == ["deploying later"]
        assert keyword(client, "f", "staging deployment") == ["We deployed the fixes to staging"]
        assert keyword(client, "f", "沙盒") == ["沙盒測試 tomorrow"]
        for session, records in expected.items():
            assert listed(client, session) == stored(records)
    assert index_dirs(server.data_dir) == [CURRENT]


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_archive_is_moved_before_serving(data_dir, make_server, version):
    expected = old_data_dir(data_dir, version)
    assert_moved(make_server(), expected)


@pytest.mark.parametrize(("version", "point"), [(1, "archive.reindex.copied"), (2, "archive.reindex.copied"),
                                                (2, "archive.reindex.renamed")])
def test_a_kill_during_the_move_loses_nothing(data_dir, version, point):
    expected = old_data_dir(data_dir, version)
    old = reindex.index_dir(data_dir / ".store/archive", version)
    server = ServerProcess(data_dir, env={"MEMSVC_FAILPOINTS": f"{point}=kill"})
    with pytest.raises(RuntimeError, match="server exited"):
        server.start()
    assert (old / "meta.json").exists(), "the old index is whole until the new one is in place"
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    try:
        assert_moved(server, expected)
    finally:
        server.terminate()


def test_a_reset_interrupted_before_the_move_is_completed_on_the_new_index(data_dir, make_server):
    old_data_dir(data_dir, 2)
    (data_dir / "sessions/.intent-s").write_bytes(msgspec.json.encode(Intent("s", "reset", next_id=3)))
    server = make_server()
    with server.client() as client:
        assert keyword(client, "s", "deploy") == []
        assert keyword(client, "t", "deploy") == ["deploying later"]
        assert client.append("s", [("user", "after the reset")]).messages[0].id == 3
    assert not list((data_dir / "sessions").glob(".intent-*"))
    assert index_dirs(data_dir) == [CURRENT]


@pytest.mark.as_process
def test_a_disk_that_fills_during_the_copy_keeps_the_old_index_and_the_next_start_finishes(data_dir, make_server):
    old_data_dir(data_dir, 1)
    before = archive_dirs(data_dir)
    server = make_server(env={"MEMSVC_FAILPOINTS": "archive.reindex.copied=enospc"})
    damaged = server.logged("archive unusable: refusing what needs it, serving the rest")
    assert "moving it to the current index version failed" in damaged[0]["problem"]
    assert "free disk space" in damaged[0]["what_to_do"]
    with server.client() as client:
        with pytest.raises(MemsvcError) as refused:
            keyword(client, "s", "deploy")
        assert (refused.value.code, refused.value.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "ARCHIVE_DAMAGED")
        client.append("s", [("user", "deploy again tomorrow")])
    assert server.terminate() == 0
    assert archive_dirs(data_dir) == before  # nothing of the copy is left, nothing of the old index changed
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        assert keyword(client, "s", "deploying") == ["deploy again tomorrow", "we deployed the fixes"]
    assert index_dirs(data_dir) == [CURRENT]
