"""The cross-language conformance scenario (clients/conformance/scenario.json) as the tests run it:
its steps, the Python runner (the Node and Go ones are in runners.py), and how results of
different clients are compared. Shared by tests/e2e/test_conformance.py (one server) and
tests/e2e/test_sharding.py (shards behind a proxy)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from memsvc_client import Client, MemsvcError
from memsvc_client.convert import enum_label, to_proto
from memsvc_client.rpcs import RPCS
from tests.support.runners import SCENARIO, scenario_runner

Results = dict[str, dict[str, Any]]

def label(message: Any, field: str) -> str:
    """An enum field of a parsed request as the client takes it: "keyword" for MATCH_KEYWORD."""
    return enum_label(message.DESCRIPTOR.fields_by_name[field].enum_type, getattr(message, field))


# Each step's request, parsed from the scenario's proto3 JSON, becomes the client's plain arguments; each
# typed result goes back to proto3 JSON through the client's own converter, so a field the result drops
# shows up as a difference from the other languages.
PYTHON_CALLS: dict[str, Callable[[Client, Any], Any]] = {
    "Append": lambda c, r: c.append(
        r.session_id, [{"role": label(m, "role"), "content": m.content, "sender": m.sender,
                        "send_at_unix_nano": m.send_at_unix_nano, "payload_json": m.payload_json}
                       for m in r.messages],
        idempotency_key=r.idempotency_key),
    "GetContext": lambda c, r: c.get_context(r.session_id, request_text=r.request_text),
    "Search": lambda c, r: c.search(
        r.session_id, r.query, match=label(r, "match"), limit=r.limit, time_range=label(r, "time_range"),
        since_unix_nano=r.since_unix_nano, until_unix_nano=r.until_unix_nano, include_window=r.include_window,
        query_embedding=list(r.query_embedding)),
    "Compact": lambda c, r: c.compact(r.session_id),
    "Summarize": lambda c, r: c.summarize(r.session_id),
    "GetSummary": lambda c, r: c.get_summary(r.session_id),
    "Reset": lambda c, r: c.reset(r.session_id, label(r, "mode")),
    "RemoveSession": lambda c, r: c.remove_session(r.session_id),
    "ListMessages": lambda c, r: c.list_messages(r.session_id, page_size=r.page_size, page_token=r.page_token,
                                                 newest_first=r.newest_first),
    "DeleteMessages": lambda c, r: c.delete_messages(r.session_id, list(r.ids), last=r.last),
    "ReplaceMessages": lambda c, r: c.replace_messages(
        r.session_id, [{"role": label(m, "role"), "content": m.content, "sender": m.sender,
                        "send_at_unix_nano": m.send_at_unix_nano, "payload_json": m.payload_json}
                       for m in r.messages],
        idempotency_key=r.idempotency_key,
        expected_last_id=r.expected_last_id if r.HasField("expected_last_id") else None),
    "FitContext": lambda c, r: c.fit_context(
        r.session_id, r.vendor, r.model, list(r.messages), overflow=r.overflow, previous_model=r.previous_model,
        context_window=r.context_window, reserved_tokens=r.reserved_tokens),
    "GetServerInfo": lambda c, r: c.get_server_info(r.session_id),
}


def steps(session: str) -> list[dict[str, Any]]:
    return json.loads(SCENARIO.read_text().replace("{session}", session))["steps"]


def run_python(target: str, session: str) -> list[dict[str, Any]]:
    results = []
    with Client(target) as client:
        for step in steps(session):
            rpc = RPCS[step["rpc"]]
            request = json_format.ParseDict(step["request"], rpc.request())
            try:
                result = PYTHON_CALLS[step["rpc"]](client, request)
                results.append({"name": step["name"], "response": json_format.MessageToDict(
                    to_proto(rpc.response, result))})
            except MemsvcError as error:
                results.append({"name": step["name"], "error": {"code": error.code.name, "reason": error.reason}})
    return results


def runner(language: str) -> Callable[[str, str], list[dict[str, Any]]]:
    return run_python if language == "python" else scenario_runner(language)


SERVER_FIELDS = {"shardName", "dataDirId", "startedAtUnixNano"}
"What GetServerInfo says about the server: behind a proxy, each session's shard answers."


def comparable(results: list[dict[str, Any]], *, across_servers: bool = False) -> list[dict[str, Any]]:
    """Results without what differs by timing, not by client: search scores keep
    only their sign (BM25 statistics span the whole archive, so a keyword hit
    scores differently once other sessions exist; each language prints float32
    its own way), and Reset's vector count goes (messages are embedded in the
    background, so how many are stored when Reset runs is a race).
    `across_servers`: the results came from different shards, so which server
    answered goes too, and so does the order of keyword hits: each shard ranks
    by the statistics of its own archive, so near ties fall either way."""
    dropped = {"vectors", *SERVER_FIELDS} if across_servers else {"vectors"}

    def visit(value: Any) -> Any:
        if isinstance(value, dict):
            kept = {key: (("positive" if item > 0 else "negative") if key == "score" else visit(item))
                    for key, item in value.items() if key not in dropped}
            if across_servers and "hits" in kept:
                kept["hits"] = sorted(kept["hits"], key=lambda hit: int(hit["message"]["id"]))
            return kept
        if isinstance(value, list):
            return [visit(item) for item in value]
        return value
    return visit(results)


def by_name(results: list[dict[str, Any]]) -> Results:
    return {result["name"]: result for result in results}
