"""`memsvc export`, `memsvc import-session` and `memsvc server-info`, each run as a real `memsvc`
process against real servers: a session to a file and into another server, whole; a file that was
cut or edited stores nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.in_process


def memsvc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={"COLUMNS": "200", "PATH": ""}, check=False)


def test_a_session_goes_to_a_file_and_into_another_server_whole(make_server, tmp_path) -> None:
    first = make_server("--shard-name", "first", "--max-history-messages", "2")
    second = make_server(directory=tmp_path / "second")
    with first.client() as client:
        client.append("alpha", [("user", "Wir deployen freitags nie."),
                                {"role": "assistant", "content": "不在周五部署。", "sender": "planner"}])
        client.append("alpha", [("user", "And on Tuesdays?"), ("assistant", "Tuesdays are fine.")],
                      idempotency_key="k2")
        client.compact("alpha")
    exported = tmp_path / "alpha.jsonl"
    done = memsvc("export", "alpha", "-o", str(exported), "--target", first.tcp)
    assert done.returncode == 0, done.stderr
    assert "exported session alpha: 4 messages" in done.stderr
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert list(lines[0]) == ["head"] and list(lines[-1]) == ["end"]
    assert lines[0]["head"]["exportedBy"] == "first" and lines[0]["head"]["firstRecentId"] == "3"
    assert [line["messages"][0]["message"]["content"] for line in lines[1:-1]] == [
        "Wir deployen freitags nie.", "不在周五部署。", "And on Tuesdays?", "Tuesdays are fine."]
    assert lines[2]["messages"][0]["message"]["sender"] == "planner"
    assert [line["messages"][0].get("idempotencyKey") for line in lines[1:-1]] == [None, None, "k2", "k2"], \
        "history.json keeps the keys of its messages; the archive does not"
    assert lines[-1]["end"]["messages"] == "4"

    done = memsvc("import-session", str(exported), "--target", second.tcp)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported session alpha: 4 messages")
    with second.client() as client:
        again = list(client.export_session("alpha"))
    assert again[-1].end.sha256 == lines[-1]["end"]["sha256"]
    done = memsvc("import-session", str(exported), "--target", second.tcp)
    assert done.returncode == 1 and "ALREADY_EXISTS SESSION_EXISTS" in done.stderr

    info = json.loads(memsvc("server-info", "--session", "alpha", "--json", "--target", first.tcp).stdout)
    assert info["shard_name"] == "first" and info["session_stored"] is True and info["session_held"] is False
    assert "shard:       first" in memsvc("server-info", "--target", first.tcp).stdout


def test_a_cut_or_edited_export_file_stores_nothing(make_server, tmp_path) -> None:
    server = make_server()
    with server.client() as client:
        client.append("beta", [("user", "one"), ("assistant", "two"), ("user", "three")])
    exported = tmp_path / "beta.jsonl"
    assert memsvc("export", "beta", "-o", str(exported), "--target", server.tcp).returncode == 0
    with server.client() as client:
        client.remove_session("beta")
    lines = exported.read_text().splitlines()
    for name, text, reason in (("cut", "\n".join(lines[:-1]), "IMPORT_INCOMPLETE"),
                               ("edited", "\n".join(lines).replace('"two"', '"deux"'), "IMPORT_MISMATCH")):
        broken = tmp_path / f"{name}.jsonl"
        broken.write_text(text + "\n")
        done = memsvc("import-session", str(broken), "--target", server.tcp)
        assert done.returncode == 1 and reason in done.stderr, done.stderr
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(lines[0] + "\nnot json\n")
    done = memsvc("import-session", str(garbled), "--target", server.tcp)
    assert done.returncode != 0 and "line 2 is not part of an export" in done.stderr
    with server.client() as client:
        assert not client.list_sessions().sessions
    assert memsvc("import-session", str(exported), "--target", server.tcp).returncode == 0
