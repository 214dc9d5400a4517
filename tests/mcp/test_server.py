"""`memsvc mcp` driven by the MCP SDK's own client, over stdio (and streamable HTTP), in front of
a real memsvc: the tools give what the gRPC client gives."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from tests.support import ROOT, wait_for

TOOLS = {"chat_history", "lookup_error_lessons", "record_error_lesson"}


def over_stdio(target: str, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "memsvc", "mcp", "--target", target, *flags],
                                 cwd=str(ROOT))


def session(server: Any, run: Callable[[McpClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with McpClient(server) as client:
            return await run(client)
    return asyncio.run(main())


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content


def seeded(server) -> None:
    with server.client() as memory:
        memory.append("agent", [("user", "We deploy on Fridays?"), ("assistant", "No: never on Fridays."),
                                ("user", "Which database does billing use?"), ("assistant", "Postgres 16.")])
        memory.record_error("web_fetch", "HTTP 403 Forbidden from cloudflare", "send a browser User-Agent",
                            cause="bot protection", keywords=["cloudflare"])


def test_the_tools_are_listed_with_descriptions_for_a_model(server):
    listed = session(over_stdio(server.tcp), lambda client: client.list_tools())
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    history = tools["chat_history"]
    assert "mode=\"search\"" in history.description and "keyword" in history.description
    properties = history.input_schema["properties"]
    assert properties["match"]["enum"] == ["semantic", "keyword", "hybrid"]
    assert properties["mode"]["enum"] == ["search", "context", "summary"]
    assert properties["time_range"]["enum"] == ["all", "day", "week", "month", "year"]
    assert properties["limit"]["maximum"] == 32
    assert set(tools["record_error_lesson"].input_schema["required"]) == {"tool_name", "symptom", "action"}
    assert tools["chat_history"].annotations.read_only_hint is True
    assert tools["record_error_lesson"].annotations.read_only_hint is False


def test_search_and_lookup_give_what_the_grpc_client_gives(server):
    seeded(server)

    async def run(client: McpClient) -> dict[str, Any]:
        return {
            "keyword": structured(await client.call_tool("chat_history", {"query": "fridays", "match": "keyword"})),
            "semantic": structured(await client.call_tool("chat_history", {"query": "billing database", "limit": 1})),
            "lookup": structured(await client.call_tool("lookup_error_lessons", {
                "tool_name": "web_fetch", "error_text": "403 Forbidden (cloudflare)"})),
            "context": structured(await client.call_tool("chat_history", {"mode": "context"})),
        }
    got = session(over_stdio(server.tcp, "--session", "agent"), run)
    with server.client() as memory:
        keyword = memory.search("agent", "fridays", match="keyword").hits
        semantic = memory.search("agent", "billing database", limit=1).hits
        lookup = memory.lookup_errors("web_fetch", "403 Forbidden (cloudflare)")
        window = memory.get_context("agent").window
    assert [(h["id"], h["content"], h["source"]) for h in got["keyword"]["hits"]] == [
        (h.message.id, h.message.content, h.source) for h in keyword]
    assert [(h["id"], h["is_context"], h["run"]) for h in got["semantic"]["hits"]] == [
        (h.message.id, h.is_context, h.run) for h in semantic]
    assert got["lookup"]["related_errors"] == lookup.related_errors != ""
    assert [lesson["id"] for lesson in got["lookup"]["lessons"]] == [r.id for r in lookup.records]
    assert [m["content"] for m in got["context"]["window"]] == [m.content for m in window]
    assert got["context"]["summary"] is None


def test_record_error_lesson_stores_it_for_every_session(server):
    async def run(client: McpClient) -> dict[str, Any]:
        return structured(await client.call_tool("record_error_lesson", {
            "tool_name": "shell", "symptom": "jq: command not found", "action": "apt-get install jq",
            "keywords": ["jq"]}))
    recorded = session(over_stdio(server.tcp, "--session", "agent"), run)
    assert recorded["stored"] is True and recorded["refreshed"] is False
    with server.client() as memory:
        [stored] = memory.list_errors().records
    assert (stored.id, stored.action, stored.session_id) == (recorded["lesson"]["id"], "apt-get install jq", "agent")
    assert "jq" in stored.keywords


def test_refusals_are_tool_errors_the_model_can_read(server):
    async def run(client: McpClient) -> list[Any]:
        return [await client.call_tool("chat_history", {"mode": "summary", "session_id": "nobody"}),
                await client.call_tool("chat_history", {"query": "x"}),
                await client.call_tool("chat_history", {"query": "x", "session_id": "s", "match": "fuzzy"})]
    missing, no_session, bad_match = session(over_stdio(server.tcp), run)
    assert missing.is_error and "NOT_FOUND SESSION_NOT_FOUND" in missing.content[0].text
    assert no_session.is_error and "--session" in no_session.content[0].text
    assert bad_match.is_error and "match" in bad_match.content[0].text


def test_the_token_comes_from_a_file(make_server, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = make_server("--token-file", str(token))
    seeded_ok = session(over_stdio(server.tcp, "--token-file", str(token), "--session", "s"),
                        lambda client: client.call_tool("record_error_lesson", {
                            "tool_name": "t", "symptom": "boom", "action": "fix"}))
    assert structured(seeded_ok)["stored"] is True
    refused = session(over_stdio(server.tcp, "--session", "s"),
                      lambda client: client.call_tool("chat_history", {"mode": "context"}))
    assert refused.is_error and "UNAUTHENTICATED MISSING_TOKEN" in refused.content[0].text


def test_streamable_http_on_a_flag(server):
    seeded(server)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "memsvc", "mcp", "--target", server.tcp, "--session", "agent",
                                "--http", f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            with socket.socket() as connection:
                return connection.connect_ex(("127.0.0.1", port)) == 0
        wait_for(listening, timeout=30)

        async def run(client: McpClient) -> Any:
            return {tool.name for tool in (await client.list_tools()).tools}, structured(
                await client.call_tool("chat_history", {"query": "postgres", "match": "keyword"}))
        names, found = session(f"http://127.0.0.1:{port}/mcp", run)
    finally:
        process.terminate()
        process.wait(30)
    assert names == TOOLS
    assert [hit["content"] for hit in found["hits"]] == ["Postgres 16."]
