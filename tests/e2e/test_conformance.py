"""Cross-language conformance: the scripted scenario of
clients/conformance/scenario.json (append, context, semantic, hybrid and
keyword search, compaction, bad input, summarizing without a model, reset,
removal) run from Python, Node and Go against one real server, over TCP and
the unix socket; every client must give the results the Python client gives,
and those must be the documented behaviour.

The Node and Go runners are built by `make test` (clients/node/dist, build/bin).
A runner that is not built is skipped, unless MEMSVC_REQUIRE_CLIENTS names it
(`make test` sets it for every client it builds), then it fails.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.support import ServerProcess
from tests.support.conformance import by_name, comparable, run_python, runner, steps
from tests.support.runners import SCENARIO


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory: pytest.TempPathFactory):
    server = ServerProcess(tmp_path_factory.mktemp("conformance") / "data", "--max-history-messages", "2").start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.kill()


@pytest.fixture(scope="module")
def reference(conformance_server: ServerProcess) -> list[dict[str, Any]]:
    return run_python(conformance_server.tcp, "conf-python-tcp")


def contents(response: dict[str, Any], key: str = "window") -> list[str]:
    return [item.get("message", item)["content"] for item in response.get(key, [])]


def test_the_python_results_are_the_documented_behaviour(reference: list[dict[str, Any]]) -> None:
    results = by_name(reference)
    sent = [m["content"] for m in steps("x")[0]["request"]["messages"]]
    later = [m["content"] for m in steps("x")[2]["request"]["messages"]]
    billing = [text for text in sent + later if "billing" in text.lower()]

    first = results["append with an idempotency key"]["response"]
    ids = [int(m["id"]) for m in first["messages"]]
    assert contents(first, "messages") == sent and ids == sorted(set(ids))
    assert first["messages"][1]["sender"] == "planner"
    assert first["messages"][0]["sendAtUnixNano"] == "1735732800000000000"
    assert "replayed" not in first
    retried = results["the same append retried"]["response"]
    assert retried["replayed"] is True and retried["messages"] == first["messages"]
    assert min(int(m["id"]) for m in results["append without a key"]["response"]["messages"]) > max(ids)
    info = results["server info"]["response"]
    assert info["sessionStored"] is True and "sessionHeld" not in info and "shardName" not in info, "unnamed"
    assert info["version"] == version("memsvc") and info["contractVersion"] == version("memsvc-client")
    assert len(info["dataDirId"]) == 32 and int(info["startedAtUnixNano"]) > 0

    assert contents(results["context window"]["response"]) == later
    semantic = results["semantic search"]["response"]["hits"]
    assert [int(hit["message"]["id"]) for hit in semantic] == sorted(int(hit["message"]["id"]) for hit in semantic)
    matches = [hit for hit in semantic if not hit.get("isContext")]
    assert max(matches, key=lambda hit: hit["score"])["message"]["content"] == "Which database does billing use?"
    assert later[1] not in contents({"hits": semantic}, "hits"), "the window is excluded by default"
    assert all("score" not in hit for hit in semantic if hit.get("isContext")), "context carries no score"
    hybrid = results["hybrid search"]["response"]["hits"]
    assert "Which database does billing use?" in [hit["message"]["content"] for hit in hybrid
                                                  if not hit.get("isContext")]
    recent = results["keyword search over recent messages"]["response"]
    assert sorted(contents(recent, "hits")) == sorted(billing)
    assert all(hit["source"] == "SOURCE_RECENT" and hit["score"] > 0 for hit in recent["hits"])

    assert results["compact"]["response"]["removed"] == 4
    assert contents(results["context window after compaction"]["response"]) == later
    both = results["keyword search over the archive and recent messages"]["response"]["hits"]
    assert sorted(hit["message"]["content"] for hit in both) == sorted(billing)
    assert {hit["message"]["content"]: hit["source"] for hit in both} == {
        text: "SOURCE_RECENT" if text in later else "SOURCE_ARCHIVE" for text in billing}
    assert [hit["score"] for hit in both] == sorted((hit["score"] for hit in both), reverse=True), "best first"
    assert sorted(contents(results["keyword search with a time range"]["response"], "hits")) == sorted(sent[2:4])
    assert contents(results["keyword search for one word"]["response"], "hits") == ["Billing runs on Postgres 16."]

    assert results["invalid session id"]["error"] == {"code": "INVALID_ARGUMENT", "reason": "INVALID_SESSION_ID"}
    assert results["message without a role"]["error"] == {"code": "INVALID_ARGUMENT", "reason": "INVALID_ROLE"}
    assert results["keyword search without words"]["error"] == {"code": "INVALID_ARGUMENT", "reason": "EMPTY_QUERY"}
    assert results["summary of a session that never existed"]["error"] == {
        "code": "NOT_FOUND", "reason": "SESSION_NOT_FOUND"}
    assert results["summarize without a summary model"]["error"] == {
        "code": "FAILED_PRECONDITION", "reason": "SUMMARY_MODEL_NOT_CONFIGURED"}

    deleted = results["reset everything"]["response"]["deleted"]
    # The archive holds every message; history.json only those after the compaction.
    assert deleted["historyMessages"] == 2 and deleted["archivedMessages"] == 6
    assert deleted.get("vectors", 0) <= 6 and set(deleted) <= {"historyMessages", "archivedMessages", "vectors"}
    assert results["context window after reset"]["response"] == {}
    assert results["keyword search after reset"]["response"] == {}
    assert results["remove the session"]["response"] == {"deleted": {}}, "reset left nothing to remove"
    assert results["summary after removal"]["error"] == {"code": "NOT_FOUND", "reason": "SESSION_NOT_FOUND"}


@pytest.mark.parametrize(("language", "transport"), [
    ("python", "unix"), ("node", "tcp"), ("node", "unix"), ("go", "tcp"), ("go", "unix")])
def test_every_client_gives_the_python_results(language: str, transport: str, conformance_server: ServerProcess,
                                              reference: list[dict[str, Any]]) -> None:
    run = runner(language)
    target = conformance_server.tcp if transport == "tcp" else conformance_server.unix
    results = run(target, f"conf-{language}-{transport}")
    expected, got = comparable(reference), comparable(results)
    assert [r["name"] for r in got] == [r["name"] for r in expected]
    for want, have in zip(expected, got, strict=True):
        assert have == want, f"{language} over {transport}, step {want['name']!r}"


def test_the_scenario_covers_the_issue(reference: list[dict[str, Any]]) -> None:
    rpcs = {step["rpc"] for step in steps("x")}
    assert {"Append", "GetContext", "Search", "Reset", "RemoveSession"} <= rpcs
    assert any(r.get("error", {}).get("code") == "INVALID_ARGUMENT" for r in reference)
    assert Path(SCENARIO).is_file()
