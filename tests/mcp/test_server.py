"""`memsvc mcp` driven by the MCP SDK's own client, over stdio (and streamable HTTP), in front of
a real memsvc: the tools give what the gRPC client gives."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support import ROOT, free_port, wait_for
from tests.support.tenancy import write_tenants

pytestmark = pytest.mark.in_process

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
    listed = session(over_stdio(server.tcp, "--session", "agent"), lambda client: client.list_tools())
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
    missing, no_session, bad_match = session(over_stdio(server.tcp, "--allow-session-prefix", ""), run)
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


# -- which sessions, and who may ask ----------------------------------------------------------------


def refused(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def test_a_tool_call_naming_a_session_outside_the_scope_is_refused_and_reads_nothing(server):
    with server.client() as memory:
        for session_id in ("agent", "other", "team-b", "shared-x"):
            memory.append(session_id, [("user", f"secret of {session_id}"), ("assistant", "noted")])

    async def run(client: McpClient) -> dict[str, Any]:
        async def history(**arguments: Any) -> Any:
            return await client.call_tool("chat_history", arguments)
        return {
            "context": await history(mode="context", session_id="other"),
            "summary": await history(mode="summary", session_id="other"),
            "search": await history(query="secret", match="keyword", session_id="other"),
            "prefix lookalike": await history(mode="context", session_id="shared"),
            "record": await client.call_tool("record_error_lesson", {
                "tool_name": "t", "symptom": "s", "action": "a", "session_id": "other"}),
            "own": await history(mode="context"),
            "named": await history(mode="context", session_id="team-b"),
            "prefixed": await history(query="secret", match="keyword", session_id="shared-x"),
        }
    got = session(over_stdio(server.tcp, "--session", "agent", "--allow-session", "team-b",
                             "--allow-session-prefix", "shared-"), run)
    for name in ("context", "summary", "search", "prefix lookalike", "record"):
        text = refused(got[name])
        assert ("PERMISSION_DENIED SESSION_NOT_ALLOWED: this MCP server's tools may touch only 'agent', 'team-b' "
                "and sessions whose id starts with 'shared-'") in text
        assert "secret of" not in text
    assert [m["content"] for m in structured(got["own"])["window"]] == ["secret of agent", "noted"]
    assert [m["content"] for m in structured(got["named"])["window"]] == ["secret of team-b", "noted"]
    assert [hit["content"] for hit in structured(got["prefixed"])["hits"]] == ["secret of shared-x"]
    with server.client() as memory:
        assert memory.list_errors().records == []  # the refused record stored nothing


@pytest.mark.parametrize("flags", [(), ("--http", "127.0.0.1:0")])
def test_an_mcp_server_told_no_sessions_does_not_start(server, flags):
    done = subprocess.run([sys.executable, "-m", "memsvc", "mcp", "--target", server.tcp, *flags], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--session" in done.stderr and "--allow-session-prefix ''" in done.stderr


@pytest.fixture
def mcp_http(tmp_path):
    """`memsvc mcp --http` on a free port of `host`, with these flags; stopped after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(server, *flags: str, host: str = "127.0.0.1") -> str:
        port = free_port()
        process = subprocess.Popen([sys.executable, "-m", "memsvc", "mcp", "--target", server.tcp,
                                    "--http", f"{host}:{port}", *flags], cwd=ROOT, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(process)

        def listening() -> bool:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            with socket.socket() as connection:
                return connection.connect_ex(("127.0.0.1", port)) == 0
        wait_for(listening, timeout=30)
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for process in started:
        process.terminate()
        process.wait(30)


def over_http(url: str, run: Callable[[McpClient], Awaitable[Any]], token: str | None = None,
              tenant: str | None = None) -> Any:
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if tenant:
            headers["memsvc-tenant"] = tenant
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                McpClient(streamable_http_client(url, http_client=http)) as client:
            return await run(client)
    return asyncio.run(main())


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}


def initialize(url: str, token: str | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", **({"Authorization": f"Bearer {token}"}
                                                                    if token else {})}
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=10)


def test_over_http_in_front_of_a_token_protected_memsvc_every_client_presents_a_token(make_server, mcp_http,
                                                                                       tmp_path):
    """The audit: `memsvc mcp --http` let any local process read any session of a token-protected memsvc."""
    memsvc_token, own_token = tmp_path / "memsvc-token", tmp_path / "mcp-token"
    memsvc_token.write_text("memsvc-s3cret\n")
    own_token.write_text("mcp-s3cret\n")
    server = make_server("--token-file", str(memsvc_token))
    with server.client(token="memsvc-s3cret") as memory:
        memory.append("agent", [("user", "We deploy on Tuesdays."), ("assistant", "Noted.")])

    async def window(client: McpClient) -> list[str]:
        return [m["content"] for m in structured(await client.call_tool("chat_history", {"mode": "context"}))["window"]]

    # Its clients present memsvc's token, which it holds to call memsvc.
    url = mcp_http(server, "--token-file", str(memsvc_token), "--session", "agent")
    for token in (None, "guess", "mcp-s3cret"):
        refusal = initialize(url, token)
        assert refusal.status_code == 401 and refusal.headers["www-authenticate"].startswith("Bearer")
        assert "Tuesdays" not in refusal.text
    assert over_http(url, window, token="memsvc-s3cret") == ["We deploy on Tuesdays.", "Noted."]

    # A token of its own: its clients never see memsvc's.
    url = mcp_http(server, "--token-file", str(memsvc_token), "--http-token-file", str(own_token),
                   "--session", "agent")
    assert initialize(url, "memsvc-s3cret").status_code == 401
    assert initialize(url).status_code == 401
    assert over_http(url, window, token="mcp-s3cret") == ["We deploy on Tuesdays.", "Noted."]


def test_mcp_over_http_beyond_loopback_needs_a_credential(server, mcp_http, tmp_path):
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "memsvc", "mcp", "--target", server.tcp, "--session", "agent",
                           "--http", f"0.0.0.0:{port}"], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to serve MCP over HTTP on 0.0.0.0 without a credential" in done.stderr
    own_token = tmp_path / "mcp-token"
    own_token.write_text("mcp-s3cret")
    url = mcp_http(server, "--session", "agent", "--http-token-file", str(own_token), host="0.0.0.0")
    assert initialize(url).status_code == 401
    assert initialize(url, "mcp-s3cret").status_code == 200


def test_mcp_over_http_bounds_its_connections_and_their_header_time(server, mcp_http):
    seeded(server)
    url = mcp_http(server, "--session", "agent", "--max-connections", "4", "--header-timeout-seconds", "1")
    host, port = url.split("/")[2].split(":")
    silent = [socket.create_connection((host, int(port)), timeout=10) for _ in range(4)]
    # Its four places are taken: a new connection waits in the kernel's queue until the header deadline
    # closes the silent ones; then it is served.
    names, found = over_http(url, lambda client: tools_and_search(client))
    assert names == TOOLS and [hit["content"] for hit in found["hits"]] == ["Postgres 16."]
    for connection in silent:
        connection.settimeout(10)
        assert connection.recv(1) == b""  # closed by the server, having sent nothing
        connection.close()


async def tools_and_search(client: McpClient) -> tuple[set[str], dict[str, Any]]:
    return {tool.name for tool in (await client.list_tools()).tools}, structured(
        await client.call_tool("chat_history", {"query": "postgres", "match": "keyword"}))


# -- tenants: each MCP client's own token ------------------------------------------------------------

TENANT_TOKENS = [("alpha-writer", "alpha", "write"), ("beta-writer", "beta", "write"),
                 ("alpha-reader", "alpha", "read"), ("every-tenant-admin", "*", "admin")]


@pytest.fixture
def tenants_server(make_server, tmp_path):
    """A memsvc with a tenants file: alpha and beta each hold a session `agent` and a lesson on web_fetch."""
    server = make_server("--tenants-file", str(write_tenants(tmp_path / "tenants.toml", TENANT_TOKENS)))
    for token, team in (("alpha-writer", "alpha"), ("beta-writer", "beta")):
        with server.client(token=token) as memory:
            memory.append("agent", [("user", f"{team} ships on Mondays"), ("assistant", f"noted for {team}")])
            memory.record_error("web_fetch", "HTTP 403 Forbidden from cloudflare", f"{team}'s fix: a proxy",
                                keywords=["cloudflare"])
    return server


async def window_and_lessons(client: McpClient) -> tuple[list[str], list[str]]:
    context = structured(await client.call_tool("chat_history", {"mode": "context"}))
    found = structured(await client.call_tool("lookup_error_lessons", {
        "tool_name": "web_fetch", "error_text": "403 Forbidden (cloudflare)"}))
    return [m["content"] for m in context["window"]], [lesson["action"] for lesson in found["lessons"]]


def test_with_pass_token_each_mcp_client_acts_as_its_own_tenant(tenants_server, mcp_http):
    url = mcp_http(tenants_server, "--pass-token", "--session", "agent")
    assert over_http(url, window_and_lessons, token="alpha-writer") == (
        ["alpha ships on Mondays", "noted for alpha"], ["alpha's fix: a proxy"])
    assert over_http(url, window_and_lessons, token="beta-writer") == (
        ["beta ships on Mondays", "noted for beta"], ["beta's fix: a proxy"])

    recorded = over_http(url, lambda client: client.call_tool("record_error_lesson", {
        "tool_name": "shell", "symptom": "jq: command not found", "action": "apt-get install jq"}),
        token="beta-writer")
    assert structured(recorded)["stored"] is True
    with tenants_server.client(token="beta-writer") as beta, tenants_server.client(token="alpha-writer") as alpha:
        assert "apt-get install jq" in [r.action for r in beta.list_errors().records]
        assert "apt-get install jq" not in [r.action for r in alpha.list_errors().records]


def test_with_pass_token_an_admin_of_every_tenant_acts_for_the_tenant_its_request_names(tenants_server, mcp_http):
    url = mcp_http(tenants_server, "--pass-token", "--session", "agent")
    assert over_http(url, window_and_lessons, token="every-tenant-admin", tenant="beta") == (
        ["beta ships on Mondays", "noted for beta"], ["beta's fix: a proxy"])
    assert over_http(url, window_and_lessons, token="every-tenant-admin", tenant="alpha") == (
        ["alpha ships on Mondays", "noted for alpha"], ["alpha's fix: a proxy"])
    # Only an admin of every tenant may name one: memsvc refuses anyone else, and the agent reads why.
    text = refused(over_http(url, lambda client: client.call_tool("chat_history", {"mode": "context"}),
                             token="alpha-writer", tenant="beta"))
    assert "PERMISSION_DENIED TENANT_FORBIDDEN" in text and "beta ships" not in text


def test_with_pass_token_a_read_token_reads_and_cannot_record(tenants_server, mcp_http):
    url = mcp_http(tenants_server, "--pass-token", "--session", "agent")

    async def run(client: McpClient) -> tuple[tuple[list[str], list[str]], Any]:
        return await window_and_lessons(client), await client.call_tool("record_error_lesson", {
            "tool_name": "shell", "symptom": "jq: command not found", "action": "apt-get install jq"})
    read, record = over_http(url, run, token="alpha-reader")
    assert read == (["alpha ships on Mondays", "noted for alpha"], ["alpha's fix: a proxy"])
    text = refused(record)
    assert "PERMISSION_DENIED ROLE_FORBIDS" in text and "write" in text
    with tenants_server.client(token="alpha-writer") as alpha:
        assert [r.action for r in alpha.list_errors().records] == ["alpha's fix: a proxy"]


def test_with_pass_token_no_token_or_an_unknown_one_is_refused(tenants_server, mcp_http):
    url = mcp_http(tenants_server, "--pass-token", "--session", "agent")
    for token in (None, "guess"):
        refusal = initialize(url, token)
        assert refusal.status_code == 401 and refusal.headers["www-authenticate"].startswith("Bearer")
        assert "Mondays" not in refusal.text
    assert initialize(url, "alpha-reader").status_code == 200


@pytest.mark.parametrize("flags", [("--http", "127.0.0.1:0", "--token-file", "TOKEN"), ()])
def test_pass_token_is_for_http_with_no_token_of_its_own(server, tmp_path, flags):
    token = tmp_path / "token"
    token.write_text("alpha-writer")
    done = subprocess.run([sys.executable, "-m", "memsvc", "mcp", "--target", server.tcp, "--session", "agent",
                           "--pass-token", *(str(token) if flag == "TOKEN" else flag for flag in flags)],
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert ("drop --http-token-file and --token-file" if flags else "over stdio") in done.stderr


def test_over_stdio_the_token_file_names_the_tenant(tenants_server, tmp_path):
    token = tmp_path / "beta-token"
    token.write_text("beta-writer\n")
    got = session(over_stdio(tenants_server.tcp, "--token-file", str(token), "--session", "agent"),
                  window_and_lessons)
    assert got == (["beta ships on Mondays", "noted for beta"], ["beta's fix: a proxy"])
