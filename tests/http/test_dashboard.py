"""The dashboard in a real headless Chromium against a real server holding real conversations
(chatterbot-corpus, benchmarks/data) and real lessons: every flow an operator has, checked on
the page and through gRPC, with a screenshot of each page (tests/support/browser.py says where)."""

import json
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memsvc_client import MemsvcError
from memsvc_client.v1 import memory_pb2 as pb
from tests.support import ServerProcess
from tests.support.browser import screenshot
from tests.support.llm_server import LLMServer, error
from tests.support.tenancy import write_tenants

pytestmark = pytest.mark.in_process

ROOT = Path(__file__).resolve().parents[2]
DIALOGUES = json.loads((ROOT / "benchmarks/data/conversations.json").read_text())["dialogues"]
TOKEN = "dashboard-token-0123456789"
SUMMARY = {
    "key_decisions": ["Do: answer questions about computers plainly", "Don't: invent hardware specifications"],
    "past_discussions": [{"topic": "what a computer is", "description": "definitions of computers and programs",
                          "direction": "settled", "last_discussed": "2025-03-01 14:02"}],
    "current_discussion": {"topic": "operating systems", "description": "which systems the user has tried",
                           "perspectives": "user curious, assistant explaining", "direction": "compare Linux"},
}


def session_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", key)


def local_time(unix_nano: int) -> str:
    """As the page writes a time: local, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_nano // 1_000_000_000))


def runs(hits) -> int:
    """How many context runs the page should draw: a run's hits share a number; run 0 stands alone."""
    count, previous = 0, None
    for hit in hits:
        if not hit.run or hit.run != previous:
            count += 1
        previous = hit.run
    return count


@pytest.fixture(scope="module")
def llm():
    server = LLMServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory, llm):
    """One server for the module: a session per corpus dialogue, one long session, three lessons."""
    server = ServerProcess(tmp_path_factory.mktemp("dashboard") / "data", "--http-listen", "127.0.0.1:0",
                           "--llm-base-url", llm.base_url, "--summary-model", "sum", "--llm-max-retries", "0",
                           "--max-history-messages", "8").start()
    roles = ("user", "assistant")
    with server.client() as client:
        for dialogue in DIALOGUES:
            client.append(session_name(dialogue["key"]),
                          [(roles[n % 2], line) for n, line in enumerate(dialogue["lines"])])
        client.append("computers", [(roles[n % 2], line) for d in DIALOGUES if d["key"].startswith("english/computers")
                                    for n, line in enumerate(d["lines"])])
        for tool, symptom, action, keywords in [
            ("web_fetch", "HTTP 403 Forbidden from cloudflare", "send a browser User-Agent", ["cloudflare"]),
            ("shell", "permission denied: ./deploy.sh", "chmod +x deploy.sh before running it", []),
            ("sql_query", "relation \"users\" does not exist", "run the migrations first", ["postgres"]),
        ]:
            client.record_error(tool, symptom, action, keywords=keywords)
    yield server
    server.terminate()


def open_dashboard(page: Page, server: ServerProcess, route: str = "") -> None:
    page.goto(f"http://{server.http}/{route}")


def test_sessions_are_listed_paged_and_filtered(served, page):
    open_dashboard(page, served)
    rows = page.locator("table.sessions tbody tr")
    expect(rows).to_have_count(25)
    first = sorted(session_name(d["key"]) for d in DIALOGUES)[0]
    expect(rows.first.locator("td").first).to_have_text(first)
    with served.client() as client:
        info = {s.session_id: s for s in client.list_sessions(page_size=1000).sessions}[first]
    expect(rows.first.locator("td").nth(1)).to_have_text(str(info.message_count))
    expect(rows.first.locator("td").nth(4)).to_have_text("—")
    screenshot(page, "01-sessions")
    page.get_by_role("button", name="Next page →").click()
    expect(page.get_by_text("Page 2")).to_be_visible()
    expect(rows).to_have_count(25)
    page.get_by_role("button", name="← Previous page").click()
    expect(rows.first.locator("td").first).to_have_text(first)

    page.get_by_label("Filter by id").fill("MONEY")
    money = sorted(session_name(d["key"]) for d in DIALOGUES if "money" in d["key"])
    expect(rows).to_have_count(25)
    expect(rows.first.locator("td").first).to_have_text(money[0])
    page.get_by_label("Per page").select_option("100")
    expect(rows).to_have_count(len(money))
    expect(page.get_by_role("button", name="Next page →")).to_be_disabled()
    screenshot(page, "02-sessions-filtered")
    page.get_by_label("Filter by id").fill("no-such-session")
    expect(page.get_by_text("No session id contains “no-such-session”.")).to_be_visible()


def test_a_session_shows_its_window_and_summary_and_searches_in_every_mode(served, llm, page):
    open_dashboard(page, served)
    page.get_by_label("Filter by id").fill("computers")
    page.get_by_role("link", name="computers", exact=True).click()
    expect(page).to_have_url(re.compile(r"#/sessions/computers$"))
    with served.client() as client:
        window = [m.content for m in client.get_context("computers").window]
    messages = page.locator("[role=tabpanel] li.message .content")
    expect(messages).to_have_text(window)
    screenshot(page, "03-session-window")

    page.get_by_role("tab", name="Summary").click()
    expect(page.get_by_text("No rolling summary yet")).to_be_visible()
    llm.script("sum", f"<summary>{json.dumps(SUMMARY)}</summary>")
    page.get_by_role("button", name="Summarize").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Summarize computers now?")
    screenshot(page, "04-confirm-summarize")
    dialog.get_by_role("button", name="Summarize").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"^Summarized \d+ messages\.$"))
    with served.client() as client:
        stored = client.get_summary("computers")
    panel = page.locator("[role=tabpanel]")
    for rule in SUMMARY["key_decisions"]:
        expect(panel.locator("ul.decisions")).to_contain_text(rule)
    expect(panel.locator("dl.discussion")).to_contain_text("operating systems")
    expect(panel.locator("table")).to_contain_text("what a computer is")
    expect(panel.locator("table")).to_contain_text("2025-03-01 14:02")
    run = stored.last_run
    expect(panel.locator(".facts")).to_have_text(re.compile(
        rf"^Summarized up to {local_time(stored.cursor_unix_nano)} \(cursor\) · last run "
        rf"{local_time(run.finished_at_unix_nano)}: summarized {run.messages} messages "
        r"\(started by Summarize, took \d+\.\d s\)$"))
    screenshot(page, "05-summary-tab")

    page.get_by_role("tab", name="Search").click()
    for mode in ("Keyword", "Semantic", "Hybrid"):
        page.get_by_label("Search this session").fill("What is a computer?" if mode != "Keyword" else "computer")
        page.get_by_label("Match").select_option(label=mode)
        page.get_by_role("button", name="Search", exact=True).click()
        with served.client() as client:
            match = {"Keyword": pb.MATCH_KEYWORD, "Semantic": pb.MATCH_SEMANTIC, "Hybrid": pb.MATCH_HYBRID}[mode]
            query = "What is a computer?" if mode != "Keyword" else "computer"
            expected = client.search("computers", query, match=match, include_window=True, time_range=pb.TIME_RANGE_ALL)
        hits = [hit for hit in expected.hits if not hit.is_context]
        assert hits, f"{mode} search found nothing to show"
        results = page.locator(".results")
        expect(results.locator(".facts")).to_have_text(re.compile(rf"^{len(hits)} hits?"))
        expect(results.locator("li.message .content")).to_have_text([hit.message.content for hit in expected.hits])
        expect(results.locator("ol.run")).to_have_count(runs(expected.hits))
        if any(hit.is_context for hit in expected.hits):  # semantic and hybrid expand hits into context runs
            expect(results.locator("li.message.context").first).to_be_visible()
        screenshot(page, f"06-search-{mode.lower()}")
    assert any(hit.is_context for hit in expected.hits)


def why(explanation) -> str:
    """What the page writes under a match for its explanation (session.tsx `Why`)."""
    tier = {"window": "the window", "recent": "recent history", "archive": "the archive"}
    parts = [f"in {tier[explanation.tier]}"]
    for name, rank, label, score in (("keyword", explanation.keyword_rank, "BM25", explanation.keyword_score),
                                     ("semantic", explanation.semantic_rank, "similarity",
                                      explanation.semantic_similarity)):
        if rank or explanation.fused_score:
            parts.append(f"{name} #{rank} ({label} {score:.3f})" if rank else f"not in the {name} list")
    if explanation.fused_score:
        parts.append(f"fused {explanation.fused_score:.4f}")
    return " · ".join(parts)


def test_search_says_why_each_match_was_found(served, page):
    open_dashboard(page, served, "#/sessions/computers")
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Search this session").fill("What is a computer program?")
    page.get_by_label("Match").select_option(label="Hybrid")
    page.get_by_role("button", name="Search", exact=True).click()
    with served.client() as client:
        expected = client.search("computers", "What is a computer program?", match=pb.MATCH_HYBRID,
                                 include_window=True, explain=True)
    found = [hit for hit in expected.hits if not hit.is_context]
    assert found and all(hit.explanation.fused_score for hit in found)
    results = page.locator(".results")
    expect(results.locator("li.message .content")).to_have_text([hit.message.content for hit in expected.hits])
    expect(results.locator("li.message:not(.context) .why")).to_have_text([why(hit.explanation) for hit in found])
    expect(results.locator("li.message.context .why")).to_have_count(0)
    screenshot(page, "06-search-explained")


def test_compact_then_reset_a_session_each_after_confirming(served, page):
    open_dashboard(page, served, "#/sessions/computers")
    with served.client() as client:
        before = client.get_context("computers").window
    expect(page.locator("[role=tabpanel] li.message")).to_have_count(len(before))

    page.get_by_role("button", name="Reset all").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("dialog")).to_be_hidden()
    with served.client() as client:
        assert len(client.get_context("computers").window) == len(before)  # a cancelled action did nothing

    def stored_messages() -> int:
        with served.client() as client:
            listed = client.list_sessions(session_id_contains="computers")
        return {s.session_id: s.message_count for s in listed.sessions}["computers"]

    stored = stored_messages()
    page.get_by_role("button", name="Compact").click()
    page.get_by_role("dialog").get_by_role("button", name="Compact").click()
    status = page.get_by_role("status")
    expect(status).to_have_text(re.compile(r"^Compacted: \d+ messages moved out of history.json\.$"))
    removed = int(re.search(r"\d+", status.inner_text()).group())
    assert removed > 0 and stored_messages() == stored - removed
    with served.client() as client:
        assert [m.content for m in client.get_context("computers").window] == [m.content for m in before]

    page.get_by_role("button", name="Reset all").click()
    expect(page.get_by_role("dialog")).to_contain_text("Reset computers entirely?")
    page.get_by_role("dialog").get_by_role("button", name="Reset all").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"^Reset: \d+ messages? and the summary deleted"))
    expect(page.get_by_text("No messages in history.json.")).to_be_visible()
    page.get_by_role("tab", name="Summary").click()
    expect(page.get_by_text("No rolling summary yet")).to_be_visible()
    screenshot(page, "07-session-reset")
    with served.client() as client:
        assert not client.get_context("computers").window
        assert client.get_summary("computers").summary is None
        assert not client.search("computers", "computer", match=pb.MATCH_KEYWORD).hits  # the archive too


def test_reset_keeping_the_summary_and_remove(served, llm, page):
    session = session_name(DIALOGUES[0]["key"])
    with served.client() as client:
        llm.script("sum", f"<summary>{json.dumps(SUMMARY)}</summary>")
        client.summarize(session)
    open_dashboard(page, served, f"#/sessions/{session}")
    page.get_by_role("button", name="Reset (keep summary)").click()
    page.get_by_role("dialog").get_by_role("button", name="Reset").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"the summary is kept\.$"))
    page.get_by_role("tab", name="Summary").click()
    expect(page.locator("ul.decisions")).to_contain_text(SUMMARY["key_decisions"][0])

    page.get_by_role("button", name="Remove session").click()
    page.get_by_role("dialog").get_by_role("button", name="Remove").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(rf"^Removed {session}"))
    with served.client() as client:
        assert session not in {s.session_id for s in client.list_sessions(page_size=1000).sessions}
    page.get_by_role("link", name="← Back to the sessions").click()
    expect(page.get_by_role("link", name=session, exact=True)).to_have_count(0)


def test_a_failed_summary_run_shows_its_reason_and_message_on_the_session_page(served, llm, page):
    with served.client() as client:
        client.append("failing", [("user", "q"), ("assistant", "a")])
        llm.script("sum", error(500, "model crashed"))
        with pytest.raises(MemsvcError):
            client.summarize("failing")
        run = client.get_summary("failing").last_run
    said = f"last run {local_time(run.finished_at_unix_nano)}: failed: LLM_UNAVAILABLE: {run.message}"
    assert "model crashed" in run.message
    open_dashboard(page, served, "#/sessions/failing")
    expect(page.locator(".summary-cursor")).to_have_text(re.compile(
        rf"^Summary cursor: none · {re.escape(said)} · 2 messages after the cursor, not yet summarized$"))
    page.get_by_role("tab", name="Summary").click()
    expect(page.locator("[role=tabpanel] .facts")).to_have_text(re.compile(
        rf"^No cursor yet · {re.escape(said)} \(started by Summarize, took \d+\.\d s\)$"))
    expect(page.get_by_text("No rolling summary yet")).to_be_visible()
    screenshot(page, "05b-summary-run-failed")


def test_lessons_are_listed_searched_edited_in_place_keeping_their_expiry_and_deleted(served, page):
    with served.client() as client:
        stored = {r.tool_name: r for r in client.list_errors().records}
    open_dashboard(page, served, "#/lessons")
    rows = page.locator("table.lessons tbody tr")
    expect(rows).to_have_count(3)
    screenshot(page, "08-lessons")
    page.get_by_label("Search lessons").fill("CLOUDFLARE")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("HTTP 403 Forbidden from cloudflare")
    page.get_by_label("Search lessons").fill("")
    page.get_by_role("button", name="List").click()
    expect(rows).to_have_count(3)

    lesson = stored["shell"]
    row = page.locator(f'tr[data-lesson="{lesson.id}"]')
    expiry = row.locator("time").inner_text()
    assert expiry
    row.get_by_role("button", name="Edit action").click()
    row.get_by_label("New action").fill("run it as `bash deploy.sh` instead")
    screenshot(page, "09-lesson-editing")
    row.get_by_role("button", name="Save").click()
    expect(row.locator("td.action")).to_have_text("run it as `bash deploy.sh` instead")
    page.reload()
    row = page.locator(f'tr[data-lesson="{lesson.id}"]')
    expect(row.locator("td.action")).to_have_text("run it as `bash deploy.sh` instead")
    expect(row.locator("time")).to_have_text(expiry)
    screenshot(page, "10-lesson-edited-after-reload")
    with served.client() as client:
        edited = {r.id: r for r in client.list_errors().records}[lesson.id]
    assert edited.action == "run it as `bash deploy.sh` instead"
    assert edited.expires_at_unix_nano == lesson.expires_at_unix_nano

    row.get_by_role("button", name="Edit action").click()
    row.get_by_label("New action").fill("")
    row.get_by_role("button", name="Save").click()
    with served.client() as client, pytest.raises(MemsvcError) as refused:
        client.update_error_action(lesson.id, "")
    expect(row.get_by_role("alert")).to_contain_text(refused.value.message)  # the server's own words
    row.get_by_role("button", name="Cancel").click()

    doomed = stored["sql_query"]
    row = page.locator(f'tr[data-lesson="{doomed.id}"]')
    row.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("dialog")).to_contain_text("relation \"users\" does not exist")
    screenshot(page, "11-confirm-delete")
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)
    expect(page.get_by_role("status")).to_contain_text("Deleted the lesson of sql_query")
    with served.client() as client:
        assert doomed.id not in {r.id for r in client.list_errors().records}
    page.reload()
    expect(rows).to_have_count(2)


def test_every_error_is_shown_in_the_servers_words(make_server, page):
    server = make_server("--http-listen", "127.0.0.1:0")
    with server.client() as client:
        client.append("plain", [("user", "hello"), ("assistant", "hi")])
        with pytest.raises(MemsvcError) as refused:
            client.summarize("plain")
    open_dashboard(page, server, "#/sessions/plain")
    page.get_by_role("button", name="Summarize").click()
    page.get_by_role("dialog").get_by_role("button", name="Summarize").click()
    alert = page.get_by_role("alert")
    expect(alert.locator("strong")).to_have_text(refused.value.message)
    expect(alert.locator(".code")).to_have_text("FAILED_PRECONDITION · SUMMARY_MODEL_NOT_CONFIGURED")
    screenshot(page, "12-server-error")


def test_with_a_token_the_dashboard_is_refused_until_login_and_keeps_the_token_in_memory_only(make_server, tmp_path,
                                                                                              page):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = make_server("--http-listen", "127.0.0.1:0", "--token-file", str(token_file))
    with server.client(token=TOKEN) as client:
        client.append("guarded", [("user", "secret plans"), ("assistant", "kept safe")])
    open_dashboard(page, server)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("requires 'authorization: Bearer <token>'")
    expect(page.get_by_role("alert")).to_contain_text("UNAUTHENTICATED · MISSING_TOKEN")
    expect(page.get_by_role("link", name="guarded")).to_have_count(0)
    screenshot(page, "13-login")

    page.get_by_label("Bearer token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("the bearer token is not one this server accepts")
    expect(page.get_by_role("alert")).to_contain_text("INVALID_TOKEN")
    screenshot(page, "14-login-wrong-token")

    page.get_by_label("Bearer token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="guarded").click()
    expect(page.locator("[role=tabpanel] li.message .content")).to_have_text(["secret plans", "kept safe"])
    screenshot(page, "15-signed-in")
    assert TOKEN not in page.url
    assert not page.context.cookies()
    assert page.evaluate("() => localStorage.length + sessionStorage.length") == 0

    page.reload()  # memory only: a reload asks again
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Bearer token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("[role=tabpanel] li.message")).to_have_count(2)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_a_tenants_token_shows_only_its_tenant_and_an_admin_of_every_tenant_picks_one(make_server, tmp_path, page):
    tenants = write_tenants(tmp_path / "tenants.toml", [("alpha-token", "alpha", "write"),
                                                        ("beta-token", "beta", "write"),
                                                        ("every-tenant-admin", "*", "admin")])
    server = make_server("--http-listen", "127.0.0.1:0", "--tenants-file", str(tenants))
    for token, team in (("alpha-token", "alpha"), ("beta-token", "beta")):
        with server.client(token=token) as client:
            client.append(f"{team}-plans", [("user", f"{team}'s secret plans")])
            client.append("shared-id", [("user", f"{team} was here")])
            client.record_error("web_fetch", f"HTTP 403 for {team}", f"{team}'s fix")
    sessions = page.locator("table.sessions tbody tr td:first-child")
    lessons = page.locator("table.lessons tbody tr")
    messages = page.locator("[role=tabpanel] li.message .content")

    def sign_in(token: str) -> None:
        page.get_by_label("Bearer token").fill(token)
        page.get_by_role("button", name="Sign in").click()

    def go(route: str) -> None:  # within the page: a reload would forget the token
        page.evaluate(f"() => {{ window.location.hash = {json.dumps(route)}; }}")

    open_dashboard(page, server)
    sign_in("alpha-token")
    expect(sessions).to_have_text(["alpha-plans", "shared-id"])
    expect(page.get_by_label("Tenant")).to_have_count(0)  # not an admin: no picker
    page.get_by_role("link", name="shared-id").click()
    expect(messages).to_have_text(["alpha was here"])
    go("#/sessions/beta-plans")
    expect(page.get_by_role("alert")).to_contain_text("NOT_FOUND")  # another tenant's is as one that does not exist
    expect(page.get_by_text("beta's secret plans")).to_have_count(0)
    go("#/lessons")
    expect(lessons).to_have_count(1)
    expect(lessons.first).to_contain_text("alpha's fix")
    screenshot(page, "16-tenant-lessons")

    page.get_by_role("button", name="Sign out").click()
    sign_in("every-tenant-admin")
    picker = page.get_by_label("Tenant")
    with server.client(token="every-tenant-admin") as admin:
        expect(picker.locator("option")).to_have_text(list(admin.list_tenants().tenants))
    expect(picker).to_have_value("default")
    expect(lessons).to_have_count(0)  # the default tenant has none
    picker.select_option("beta")
    expect(lessons).to_have_count(1)
    expect(lessons.first).to_contain_text("beta's fix")
    go("#/sessions")
    expect(sessions).to_have_text(["beta-plans", "shared-id"])
    page.get_by_role("link", name="shared-id").click()
    expect(messages).to_have_text(["beta was here"])
    screenshot(page, "17-admin-acting-for-beta")
    picker.select_option("alpha")
    expect(messages).to_have_text(["alpha was here"])
