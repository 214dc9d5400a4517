"""`memsvc import` adopts a reference data directory, then a real server serves it."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from memsvc.window import legacy


def reference_directory(root: Path) -> Path:
    sessions = root / "reference" / "sessions"
    alpha = sessions / "alpha"
    alpha.mkdir(parents=True)
    alpha_history = [
        {"id": "0f3a", "role": "user", "content": "當前時間: 2025-02-03 09:10:11\n傳送者: 小明\n我們在沙盒裡測試部署"},
        {"id": "0f3b", "role": "assistant", "content": "好的，沙盒已準備", "sendAt": 1738545012000000000},
        {"role": "user", "content": "sendAt: 2025-02-03 09:12:00, sender: bob\nship the release notes"},
    ]
    (alpha / "history.json").write_text(json.dumps(alpha_history, ensure_ascii=False, indent=2))
    (alpha / "summary.json").write_text(json.dumps({
        "key_decisions": ["Do: test in the sandbox first"], "past_discussions": [],
        "current_discussion": {"topic": "deploy", "description": "", "perspectives": "", "direction": ""}}))
    (alpha / ".summary_cursor").write_text("2025-02-03 09:10:11")
    beta = sessions / "beta"
    beta.mkdir()
    (beta / "history.json").write_text(json.dumps([{"role": "user", "content": "no time at all"}]))
    named = sessions / "user:42"  # a framework's id: stored under an escaped name, served as written
    named.mkdir()
    (named / "history.json").write_text(json.dumps([{"role": "user", "content": "hello from a framework"}]))
    bad = sessions / "bad\x07"  # a control character: no session id holds one
    bad.mkdir()
    (bad / "history.json").write_text("[]")
    return root / "reference"


def digest(directory: Path) -> str:
    hashed = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        hashed.update(str(path).encode())
        if path.is_file():
            hashed.update(path.read_bytes())
    return hashed.hexdigest()


def run_import(source: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memsvc", "import", str(source), "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_import_then_serve(tmp_path, data_dir, make_server):
    source = reference_directory(tmp_path)
    before = digest(source)
    result = run_import(source, data_dir)
    assert result.returncode == 0, result.stderr
    assert "imported 3 sessions (5 messages)" in result.stdout
    assert "skipped bad\x07: not a valid session id" in result.stdout
    assert digest(source) == before  # the source is never modified

    server = make_server()
    with server.client() as client:
        window = client.get_context("alpha").window
        assert [(m.id, m.content, m.sender) for m in window] == [
            (1, "我們在沙盒裡測試部署", "小明"), (2, "好的，沙盒已準備", ""), (3, "ship the release notes", "bob")]
        assert window[0].send_at_unix_nano == legacy.local_to_unix_nano("2025-02-03 09:10:11")
        assert client.get_summary("alpha").summary.key_decisions == ["Do: test in the sandbox first"]
        client.append("alpha", [("user", "next")])
        client.append("alpha", [("assistant", "ok")])
        assert client.compact("alpha").removed == 0  # the window (16) holds everything
        hits = client.search("alpha", "沙盒", match="keyword").hits
        assert sorted(h.message.id for h in hits) == [1, 2]
        assert client.get_context("beta").window[0].send_at_unix_nano > 0
        assert [m.content for m in client.get_context("user:42").window] == ["hello from a framework"]
        assert "user:42" in [info.session_id for info in client.list_sessions().sessions]
    assert (data_dir / "sessions/alpha/.summary_cursor").read_text() == "2025-02-03 09:10:11"


def test_archive_holds_imported_messages_once_compacted(tmp_path, data_dir, make_server):
    source = reference_directory(tmp_path)
    assert run_import(source, data_dir).returncode == 0
    server = make_server("--max-history-messages", "1")
    with server.client() as client:
        client.append("alpha", [("assistant", "closing the pair")])
        assert client.compact("alpha").removed == 2  # the cut stays after an assistant message
        hits = client.search("alpha", "沙盒", match="keyword").hits
        assert {(h.message.id, h.source) for h in hits} == {(1, "archive"), (2, "archive")}


def test_second_import_skips_existing_sessions_and_a_running_server_blocks_it(tmp_path, data_dir, make_server):
    source = reference_directory(tmp_path)
    assert run_import(source, data_dir).returncode == 0
    again = run_import(source, data_dir)
    assert "imported 0 sessions" in again.stdout and "skipped alpha: already in the data directory" in again.stdout
    make_server()
    blocked = run_import(source, data_dir)
    assert blocked.returncode == 2 and "in use by memsvc pid" in blocked.stderr
