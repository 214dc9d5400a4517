"""Cross-language conformance: the scripted scenario of
clients/conformance/scenario.json (append, context, semantic, hybrid and
keyword search, compaction, bad input, summarizing without a model, fitting
agent runs to a model's window, reset, removal, system and tool messages with payloads, paging through messages,
deleting them) run from Python, Node and Go against one real server, over TCP and
the unix socket; every client must give the results the Python client gives,
and those must be the documented behaviour.

The Node and Go runners are built by `make test` (clients/node/dist, build/bin).
A runner that is not built is skipped, unless MEMSVC_REQUIRE_CLIENTS names it
(`make test` sets it for every client it builds), then it fails.
"""

from __future__ import annotations

import json
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
    # The reply acknowledges each message by id, role, sender and time; contents are not echoed back.
    assert [m["role"] for m in first["messages"]] == [m["role"] for m in steps("x")[0]["request"]["messages"]]
    assert ids == sorted(set(ids)) and all("content" not in m for m in first["messages"])
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

    def fit_step(name: str) -> tuple[list[str], dict[str, Any]]:
        return next(s for s in steps("x") if s["name"] == name)["request"]["messages"], results[name]["response"]

    def fit_stages(response: dict[str, Any]) -> list[tuple[str, str]]:
        return [(s["stage"].removeprefix("FIT_STAGE_"), s["outcome"].removeprefix("FIT_OUTCOME_"))
                for s in response["stages"]]

    sent, under = fit_step("fit a run under budget")
    assert under["messages"] == sent, "byte for byte: the caller's spacing and unknown fields survive"
    assert fit_stages(under) == [("CHECK_THRESHOLD", "UNCHANGED")] and under["fits"] and "changed" not in under
    assert (under["contextWindow"], under["windowSource"], under["windowEntry"], under["budgetTokens"]) == (
        128000, "WINDOW_SOURCE_SHIPPED", "openai/gpt-4o", 102400)
    assert (under["counting"], under["tokenizer"]) == ("TOKEN_COUNTING_EXACT", "o200k_base")
    assert under["tokensBefore"] == under["tokensAfter"] > 0
    _, unknown = fit_step("fit for a model no table lists")
    assert (unknown["contextWindow"], unknown["windowSource"], unknown["counting"]) == (
        128000, "WINDOW_SOURCE_FALLBACK", "TOKEN_COUNTING_ESTIMATE") and "windowEntry" not in unknown
    sent, skipped = fit_step("fit over budget without a summary model")
    assert fit_stages(skipped) == [("CHECK_THRESHOLD", "UNCHANGED"), ("EXTRACT_OLD_HISTORIES", "SKIPPED"),
                                   ("TOOL_HISTORY", "SKIPPED")]
    assert {s["reason"] for s in skipped["stages"][1:]} == {"LLM_NOT_CONFIGURED"}
    assert skipped["messages"] == sent and "fits" not in skipped and skipped["tokensBefore"] > skipped["budgetTokens"]
    sent, trimmed = fit_step("fit after a context-length error")
    assert fit_stages(trimmed)[-1] == ("TRIM_FALLBACK", "COMPACTED") and trimmed["stages"][-1]["messagesRemoved"] == 2
    assert trimmed["messages"] == sent[:2] + sent[4:], "the oldest whole exchange is dropped, nothing else"
    assert trimmed["fits"] and trimmed["changed"] and trimmed["targetTokens"] < trimmed["tokensBefore"]
    sent, switched = fit_step("fit after a switch of models")
    assert fit_stages(switched) == [("CHECK_THRESHOLD", "UNCHANGED"), ("RAW_TOOL_FALLBACK", "COMPACTED")]
    assert switched["messages"][:2] == sent[:2]
    assert [json.loads(m) for m in switched["messages"][2:]] == [
        {"role": "assistant", "content": '[tool call list_dir id=c1] {"path": "/srv"}'},
        {"role": "user", "content": "[tool result list_dir id=c1]\napp data logs"}]
    assert results["fit a run that nothing can fit"]["error"] == {
        "code": "FAILED_PRECONDITION", "reason": "CONTEXT_TOO_LARGE"}

    deleted = results["reset everything"]["response"]["deleted"]
    # The archive holds every message; history.json only those after the compaction.
    assert deleted["historyMessages"] == 2 and deleted["archivedMessages"] == 6
    assert deleted.get("vectors", 0) <= 6 and set(deleted) <= {"historyMessages", "archivedMessages", "vectors"}
    assert results["context window after reset"]["response"] == {}
    assert results["keyword search after reset"]["response"] == {}
    assert results["remove the session"]["response"] == {"deleted": {}}, "reset left nothing to remove"
    assert results["summary after removal"]["error"] == {"code": "NOT_FOUND", "reason": "SESSION_NOT_FOUND"}

    framework = next(step for step in steps("x")
                     if step["name"] == "append system and tool messages with payloads")["request"]["messages"]
    assert [m["role"] for m in results["append system and tool messages with payloads"]["response"]["messages"]] == [
        m["role"] for m in framework]
    newest = results["list the newest messages"]["response"]
    assert [m["content"] for m in newest["messages"]] == [m["content"] for m in framework[2:]]
    assert [m.get("payloadJson") for m in newest["messages"]] == [m.get("payloadJson") for m in framework[2:]]
    assert newest["nextPageToken"] == "3", "the id the next page starts below"
    older = results["list the page before them"]["response"]
    assert [m["content"] for m in older["messages"]] == [m["content"] for m in framework[:2]]
    assert "nextPageToken" not in older
    popped = results["delete the newest message"]["response"]
    assert [m["content"] for m in popped["messages"]] == [framework[-1]["content"]]
    by_id = results["delete messages by id"]["response"]
    assert [m["content"] for m in by_id["messages"]] == [framework[0]["content"], framework[3]["content"]]
    assert by_id["messages"][1]["payloadJson"] == framework[3]["payloadJson"]
    assert by_id["deleted"]["historyMessages"] == 2 and by_id["deleted"]["archivedMessages"] == 2
    assert [m["content"] for m in results["messages after deletion"]["response"]["messages"]] == [
        m["content"] for m in framework[1:3]]
    assert results["keyword search after deletion"]["response"] == {}
    assert results["delete without naming messages"]["error"] == {
        "code": "INVALID_ARGUMENT", "reason": "DELETE_TARGET_REQUIRED"}
    replaced = results["replace the whole history"]["response"]
    # Acknowledged as Append is (ids and times, not the text sent), with what it deleted: the two left.
    assert [(m["id"], m["role"]) for m in replaced["messages"]] == [("6", "ROLE_USER"), ("7", "ROLE_ASSISTANT")]
    assert replaced["deleted"]["historyMessages"] == 2 and replaced["deleted"]["archivedMessages"] == 2
    assert results["replace expecting a newest message it no longer has"]["error"] == {
        "code": "FAILED_PRECONDITION", "reason": "HISTORY_CHANGED"}
    assert [m["content"] for m in results["messages after replacement"]["response"]["messages"]] == [
        "Start over: which port?", "Port 8443."]
    # Nothing is left behind: BM25 statistics span every session, so the next run scores as this one did.
    assert results["remove the session again"]["response"]["deleted"]["archivedMessages"] == 2


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
    assert {"Append", "GetContext", "Search", "Reset", "RemoveSession", "ListMessages", "DeleteMessages",
            "FitContext"} <= rpcs
    assert any(r.get("error", {}).get("code") == "INVALID_ARGUMENT" for r in reference)
    assert Path(SCENARIO).is_file()
