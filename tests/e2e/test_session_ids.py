"""Session ids as users write them, through every surface of a real server, and data directories written
before ids could be anything.

tests/fixtures/d034eea-data.tar.gz is a data directory memsvc wrote at d034eea (before this change): five
sessions with ids of the old rule (one compacted, one temp-, one held for a move, one with an idempotency
key), the archive and vectors of its time, and a journal of the old layout, because that server was killed
-9 right after its last Append (meta.json: alpha's history.json size before that Append, to play a power
cut that lost it from the page cache).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import httpx
import pytest

from memsvc.core import layout
from memsvc_client import Client
from tests.support import ROOT, ServerProcess

pytestmark = pytest.mark.in_process

UUID = "8c5b2a9e-3f41-4d7a-9a0e-2b7f3c1d5e6f"
IDS = ["user:42", "conv/1", "a b", "alice@example.com", "é", "é" * 128, UUID, "../etc", "-x", "中" * 85]
"As frameworks and chat platforms hand them out; 'é' * 128 is 256 bytes, the longest id there is."
FIXTURE = ROOT / "tests/fixtures/d034eea-data.tar.gz"


def memsvc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env={"COLUMNS": "400", "PATH": ""}, check=False)


@pytest.fixture
def http_server(make_server) -> ServerProcess:
    return make_server("--http-listen", "127.0.0.1:0")


def test_any_id_is_stored_searched_listed_and_read_back_as_written(http_server: ServerProcess):
    with http_server.client() as client:
        for session_id in IDS:
            appended = client.append(session_id, [("user", f"we deploy on fridays, says {session_id}"),
                                                  ("assistant", "noted")])
            assert [message.id for message in appended.messages] == [1, 2]
        for session_id in IDS:
            window = client.get_context(session_id).window
            assert [message.content for message in window] == [f"we deploy on fridays, says {session_id}", "noted"]
            hits = client.search(session_id, "fridays", match="keyword", include_window=True).hits
            assert [hit.message.id for hit in hits] == [1]
        listed = [info.session_id for info in client.list_sessions(page_size=3).sessions]
        assert listed == sorted(IDS)[:3], "ordered by id as written"
        every = []
        token = ""
        while True:
            page = client.list_sessions(page_size=3, page_token=token)
            every += [info.session_id for info in page.sessions]
            if not (token := page.next_page_token):
                break
        assert every == sorted(IDS), "paging hands out ids as tokens and takes them back"
        assert [info.session_id for info in client.list_sessions(session_id_contains="@EXAMPLE").sessions] == [
            "alice@example.com"]
    sessions_dir = http_server.data_dir / "sessions"
    for session_id in IDS:
        directory = sessions_dir / layout.directory_name(session_id)
        assert directory.is_dir() and directory.parent == sessions_dir, "never outside the data root"
    assert not (http_server.data_dir / "etc").exists() and not (sessions_dir.parent.parent / "etc").exists()

    # HTTP/JSON speaks the same ids.
    reply = httpx.post(f"http://{http_server.http}/memsvc.v1.MemoryService/GetContext",
                       json={"sessionId": "user:42"}, timeout=10)
    assert reply.status_code == 200 and reply.json()["window"][0]["content"].endswith("user:42")
    refused = httpx.post(f"http://{http_server.http}/memsvc.v1.MemoryService/Append",
                         json={"sessionId": "a\u202eb", "messages": [{"role": "ROLE_USER", "content": "x"}]},
                         timeout=10)
    assert refused.status_code == 400 and "Cc, Cf" in refused.json()["message"]


def test_the_cli_and_export_import_carry_ids_as_written(make_server, tmp_path: Path):
    source = make_server()
    target = make_server(directory=tmp_path / "target")
    with source.client() as client:
        for session_id in IDS:
            client.append(session_id, [("user", f"hello from {session_id}")])
    listed = json.loads(memsvc("sessions", "--json", "--target", source.tcp).stdout)
    assert sorted(info["session_id"] for info in listed) == sorted(IDS)
    for session_id in IDS:
        shown = memsvc("show", "--json", "--target", source.tcp, "--", session_id)  # "--": "-x" is an id
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["window"][0]["content"] == f"hello from {session_id}"
        export = tmp_path / f"export-{IDS.index(session_id)}.json"
        exported = memsvc("export", "-o", str(export), "--target", source.tcp, "--", session_id)
        assert exported.returncode == 0, exported.stderr
        assert session_id in export.read_text(encoding="utf-8") or json.dumps(session_id) in export.read_text()
        imported = memsvc("import-session", str(export), "--target", target.tcp)
        assert imported.returncode == 0, imported.stderr
    with Client(target.tcp) as client:
        assert sorted(info.session_id for info in client.list_sessions().sessions) == sorted(IDS)
        for session_id in IDS:
            assert client.get_context(session_id).window[0].content == f"hello from {session_id}"


def test_a_data_directory_of_the_old_rule_keeps_every_session_in_place(make_server, tmp_path: Path):
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    data_dir = tmp_path / "data"
    before = json.loads((tmp_path / "meta.json").read_text())["alpha_history_before_last_append"]
    alpha_history = data_dir / "sessions/alpha/history.json"
    with alpha_history.open("r+b") as file:  # the last Append never reached the disk: only the journal has it
        file.truncate(before)
    names = sorted(path.name for path in (data_dir / "sessions").iterdir())
    server = make_server(directory=data_dir)
    assert sorted(path.name for path in (data_dir / "sessions").iterdir() if not path.name.startswith(".")) == [
        name for name in names if not name.startswith(".")], "no session moved"
    with server.client() as client:
        window = client.get_context("alpha").window
        assert window[-1].content == "the last question before the crash", "the old journal was replayed"
        assert [m.id for m in window] == list(range(26, 42))
        hits = client.search("alpha", "sandbox", match="keyword", limit=32, include_window=True).hits
        archived = {hit.message.id for hit in hits if hit.source == "archive"}
        assert archived == set(range(1, 24, 2)), "the compacted questions are still archived"
        assert sorted(info.session_id for info in client.list_sessions().sessions) == [
            "A.b_c-9", "_u", "alpha", "moved", "temp-x"]
        assert client.append("A.b_c-9", [("user", "retried")], idempotency_key="k1").replayed
        assert client.get_server_info().held_sessions == 1
        with pytest.raises(Exception, match="SESSION_MOVING|moving"):
            client.append("moved", [("user", "too early")])
        assert client.release_session("moved").was_held
        assert client.append("moved", [("user", "back")]).messages[0].id == 2
