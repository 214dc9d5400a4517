"""Re-indexing an older archive for the new analyzer, under a real server: a Reset interrupted before
the upgrade is completed on the new index; a disk that fills during the copy keeps the old index and
refuses only what needs the archive; a kill during the copy loses nothing."""

from pathlib import Path

import grpc
import msgspec
import pytest

from memsvc.archive import keywords, reindex
from memsvc.window.intents import Intent
from memsvc_client import MemsvcError
from tests.support import ServerProcess
from tests.support.archives import old_archive

OLD = {"s": ["we deployed the fixes", "ok"], "t": ["deploying later"]}


def old_data_dir(data_dir: Path) -> None:
    """A data directory as the first analyzer's memsvc left it: every message compacted into the archive."""
    old_archive(data_dir / ".store", OLD)
    for session, texts in OLD.items():
        directory = data_dir / "sessions" / session
        directory.mkdir(parents=True)
        (directory / ".next_id").write_text(str(len(texts) + 1))


def keyword(client, session: str, query: str) -> list[str]:
    return [hit.message.content for hit in client.search(session, query, match="keyword").hits]


def archive_dirs(data_dir: Path) -> dict[str, bytes]:
    """Every file of every index directory, by path: what the archive holds on disk."""
    root = data_dir / ".store/archive"
    return {str(path.relative_to(root)): path.read_bytes() for path in root.glob("index*/*") if path.is_file()}


def test_a_reset_interrupted_before_the_upgrade_is_completed_on_the_new_index(data_dir, make_server):
    old_data_dir(data_dir)
    (data_dir / "sessions/.intent-s").write_bytes(msgspec.json.encode(Intent("s", "reset", next_id=3)))
    server = make_server()
    with server.client() as client:
        assert keyword(client, "s", "deploy") == []
        assert keyword(client, "t", "deploy") == ["deploying later"]
        assert client.append("s", [("user", "after the reset")]).messages[0].id == 3
    assert not list((data_dir / "sessions").glob(".intent-*"))
    assert not (data_dir / ".store/archive/index").exists()


def test_a_disk_that_fills_during_the_copy_keeps_the_old_index_and_the_next_start_finishes(data_dir, make_server):
    old_data_dir(data_dir)
    before = archive_dirs(data_dir)
    server = make_server(env={"MEMSVC_FAILPOINTS": "archive.reindex.copied=enospc"})
    damaged = server.logged("archive unusable: refusing what needs it, serving the rest")
    assert "re-indexing it for the new analyzer failed" in damaged[0]["problem"]
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
    assert not (data_dir / ".store/archive/index").exists()


def test_a_kill_during_the_copy_loses_nothing(data_dir):
    old_data_dir(data_dir)
    server = ServerProcess(data_dir, env={"MEMSVC_FAILPOINTS": "archive.reindex.copied=kill"})
    with pytest.raises(RuntimeError, match="server exited"):
        server.start()
    assert (data_dir / ".store/archive/index/meta.json").exists()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    try:
        with server.client() as client:
            assert keyword(client, "s", "deploys") == ["we deployed the fixes"]
            assert keyword(client, "t", "deploys") == ["deploying later"]
        current = reindex.index_dir(data_dir / ".store/archive", keywords.ANALYZER_VERSION)
        assert sorted(path.name for path in current.parent.iterdir() if path.is_dir()) == [current.name]
    finally:
        server.terminate()
