"""The dashboard's plots in a real headless Chromium against a real server: the overview draws the server's
own metrics history after real traffic (gRPC and HTTP calls alike), scoped to the caller's tenant, and a
session page shows its messages over time, its tiers, its summary cursor and last run. The history steps every 10 s,
so each test waits for a step or two (never asserting how long it took)."""

import json
import re
import time

import httpx
import pytest
from playwright.sync_api import expect

from memsvc_client import MemsvcError
from tests.support import ServerProcess, wait_for
from tests.support.browser import screenshot
from tests.support.llm_server import LLMServer
from tests.support.tenancy import write_tenants

pytestmark = pytest.mark.in_process

ROOT_SUMMARY = {"key_decisions": ["Do: keep answers short"], "past_discussions": [],
                "current_discussion": {"topic": "plots", "description": "a test", "perspectives": "",
                                       "direction": ""}}
LINES = ["how do I plot latency", "use a histogram and read its quantiles", "what about p99",
         "the slowest one in a hundred", "and the backlog", "messages waiting for their embedding"]


def history(server: ServerProcess, token: str | None = None, tenant: str | None = None) -> dict:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    if tenant:
        headers["memsvc-tenant"] = tenant
    reply = httpx.get(f"http://{server.http}/dashboard/history", headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()


def total(plot: dict, series: str) -> float:
    return sum(value or 0 for value in plot["series"][series])


def talk(client, session: str, rounds: int) -> None:
    for n in range(rounds):
        client.append(session, [("user", LINES[n % len(LINES)]), ("assistant", LINES[(n + 1) % len(LINES)])])
        client.search(session, "latency quantiles", match="keyword")
        client.search(session, "slow calls", match="semantic")


@pytest.fixture(scope="module")
def llm():
    server = LLMServer().start()
    yield server
    server.stop()


def test_the_overview_plots_real_traffic(make_server, page):
    server = make_server("--http-listen", "127.0.0.1:0")
    with server.client() as client:
        talk(client, "plotted", 20)
        client.record_error("web_fetch", "HTTP 403 from cloudflare", "send a browser User-Agent")
        for _ in range(3):
            client.lookup_errors("web_fetch", "HTTP 403 from cloudflare")
    # A call over HTTP counts as one over gRPC does.
    reply = httpx.post(f"http://{server.http}/memsvc.v1.MemoryService/Search", json={
        "sessionId": "plotted", "query": "backlog", "match": "MATCH_HYBRID"}, timeout=10)
    assert reply.status_code == 200, reply.text
    wait_for(lambda: total(history(server), "search_hybrid_per_second") > 0 and total(history(server), "sessions"))

    plot = history(server)
    assert plot["key"] == "default" and plot["tracked"] and plot["step_seconds"] == 10
    assert len(plot["times"]) == len(plot["series"]["append_per_second"]) >= 1
    for kind in ("append", "search_keyword", "search_semantic", "search_hybrid", "lookup_errors"):
        assert total(plot, f"{kind}_per_second") > 0, kind
        assert max(value or 0 for value in plot["series"][f"{kind}_p99_ms"]) > 0, kind
    assert total(plot, "error_memory_hits") == 3  # one lesson found by each of three lookups
    assert plot["series"]["sessions"][-1] == 1
    assert plot["series"]["bytes_window"][-1] > 0

    page.goto(f"http://{server.http}/#/overview")
    charts = page.locator("figure.chart")
    expect(charts).to_have_count(7)
    for title in ("Calls per second", "Latency p50", "Latency p99", "Embedding backlog", "Sessions",
                  "Stored bytes per tier", "Error memory"):
        expect(page.locator(f'figure.chart[data-title="{title}"] canvas')).to_have_count(1)
    calls = page.locator('figure.chart[data-title="Calls per second"] .u-legend')
    for label in ("append", "search keyword", "search semantic", "search hybrid"):
        expect(calls).to_contain_text(label)
    expect(page.locator('figure.chart[data-title="Sessions"] .u-legend')).to_contain_text("sessions 1")
    expect(page.locator("section .facts").first).to_contain_text("tenant default, one point every 10 s")
    screenshot(page, "20-overview")


def test_the_history_is_scoped_to_the_callers_tenant(make_server, tmp_path):
    tenants = write_tenants(tmp_path / "tenants.toml", [("alpha-token", "alpha", "read"),
                                                        ("beta-token", "beta", "write"),
                                                        ("every-tenant-admin", "*", "admin")])
    server = make_server("--http-listen", "127.0.0.1:0", "--tenants-file", str(tenants))
    with server.client(token="beta-token") as beta:
        talk(beta, "beta-only", 5)
    wait_for(lambda: total(history(server, "beta-token"), "append_per_second") > 0)

    beta, alpha = history(server, "beta-token"), history(server, "alpha-token")
    every, picked = history(server, "every-tenant-admin"), history(server, "every-tenant-admin", "alpha")
    assert (beta["key"], alpha["key"], every["key"], picked["key"]) == ("beta", "alpha", "*", "alpha")
    assert total(alpha, "append_per_second") == 0 and total(picked, "append_per_second") == 0
    assert total(every, "append_per_second") == pytest.approx(total(beta, "append_per_second"))
    assert beta["series"]["sessions"][-1] == 1 and every["series"]["sessions"][-1] == 1
    assert alpha["series"]["sessions"][-1] in (0, None)

    refused = httpx.get(f"http://{server.http}/dashboard/history", timeout=10)
    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    other = httpx.get(f"http://{server.http}/dashboard/history", timeout=10,
                      headers={"authorization": "Bearer alpha-token", "memsvc-tenant": "beta"})
    assert other.status_code == 403 and other.json()["details"][0]["debug"]["reason"] == "TENANT_FORBIDDEN"
    assert "append" not in json.dumps(other.json())


def test_a_session_page_shows_its_messages_tiers_and_summary_cursor(make_server, llm, page):
    server = make_server("--http-listen", "127.0.0.1:0", "--max-history-messages", "4", "--llm-base-url", llm.base_url,
                         "--summary-model", "sum", "--llm-max-retries", "0")
    with server.client() as client:
        talk(client, "tiers", 12)  # 24 messages
        llm.script("sum", f"<summary>{json.dumps(ROOT_SUMMARY)}</summary>")
        client.summarize("tiers")
        client.append("tiers", [("user", "one after the summary")])

        def compacted() -> bool:
            try:  # ARCHIVE_BEHIND until the archive has indexed the messages
                return client.compact("tiers").removed > 0
            except MemsvcError:
                return False

        wait_for(compacted)
        stored = client.list_sessions(session_id_contains="tiers").sessions[0].message_count
        window = len(client.get_context("tiers").window)
        cursor = client.get_summary("tiers").cursor_unix_nano
        run = client.get_summary("tiers").last_run
    assert stored < 25 and cursor > 0
    ran = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.finished_at_unix_nano // 1_000_000_000))

    page.goto(f"http://{server.http}/#/sessions/tiers")
    expect(page.locator('figure.chart[data-title="Messages over time"] canvas')).to_have_count(1)
    expect(page.locator('figure.chart[data-title="Messages over time"] .u-legend')).to_contain_text("messages 25")
    tiers = page.locator("table.bars tr")
    expect(tiers.locator("td.count")).to_have_text([str(window), str(stored), str(25 - stored)])
    expect(page.locator(".summary-cursor")).to_have_text(
        re.compile(rf"^Summary cursor: \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d · last run {ran}: summarized 24 messages · "
                   r"1 message after the cursor, not yet summarized$"))
    screenshot(page, "21-session-activity")


def test_a_session_of_one_message_is_plotted_over_the_minute_before_it(make_server, page):
    """A newcomer's first message: the chart spans the minute before it, not the years uPlot pads a lone time with."""
    server = make_server("--http-listen", "127.0.0.1:0")
    sent = 1_790_000_000
    with server.client() as client:
        client.append("first", [{"role": "user", "content": "hello", "send_at_unix_nano": sent * 1_000_000_000}])
    page.goto(f"http://{server.http}/#/sessions/first")
    chart = page.locator('figure.chart[data-title="Messages over time"] div[data-x-max]')
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-x-max", str(sent))
    expect(chart).to_have_attribute("data-x-min", str(sent - 60))
    screenshot(page, "session-one-message")
