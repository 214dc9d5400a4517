"""The operator commands, each run as a real `memsvc` process against a real server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memsvc.cli import build_parser
from tests.support import ROOT
from tests.support.llm_server import summary_reply

pytestmark = pytest.mark.in_process

COMMANDS = ["sessions", "show", "search", "compact", "summarize", "reset", "remove", "delete"]
LESSON_COMMANDS = ["list", "show", "edit", "delete"]


def memsvc(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          input=stdin, timeout=60, env={"COLUMNS": "200", "PATH": ""}, check=False)


def ok(*args: str, stdin: str | None = None) -> str:
    done = memsvc(*args, stdin=stdin)
    assert done.returncode == 0, f"memsvc {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
    return done.stdout


def refused(*args: str) -> str:
    done = memsvc(*args)
    assert done.returncode == 1, done
    assert done.stdout == ""
    return done.stderr


@pytest.fixture
def talk(server):
    """A server holding two sessions; `talk(command...)` runs memsvc against it."""
    with server.client() as memory:
        memory.append("alpha", [("user", "We deploy on Fridays?"),
                                {"role": "assistant", "content": "No: never on Fridays.", "sender": "planner"}])
        memory.append("beta", [("user", "hello")])
    return lambda *args, **kwargs: ok(*args, "--target", server.tcp, **kwargs)


def test_help_documents_every_command():
    overview = ok("--help")
    for command in ["serve", "import", "mcp", "lessons", *COMMANDS]:
        assert command in overview, command
    for command in [*COMMANDS, "mcp"]:
        text = ok(command, "--help")
        assert "--target" in text and "--token-file" in text, command
    for command in LESSON_COMMANDS:
        assert "--json" in ok("lessons", command, "--help")
    assert "--match {semantic,keyword,hybrid}" in ok("search", "--help")
    assert "--mode {summary,all}" in ok("reset", "--help")
    assert "--id ID" in ok("delete", "--help") and "--last LAST" in ok("delete", "--help")


def test_sessions_as_a_table_and_as_json(talk):
    lines = talk("sessions").splitlines()
    assert lines[0].split() == ["SESSION", "MESSAGES", "BYTES", "LAST", "APPEND", "SUMMARY"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["alpha"][1] == "2" and rows["beta"][1] == "1" and rows["alpha"][-1] == "no"
    listed = json.loads(talk("sessions", "--json"))
    assert [(s["session_id"], s["message_count"], s["has_summary"]) for s in listed] == [
        ("alpha", 2, False), ("beta", 1, False)]


def test_show_prints_the_window_and_the_summary(talk):
    shown = talk("show", "alpha")
    assert "session alpha: the last 2 messages" in shown
    assert "We deploy on Fridays?" in shown and "planner" in shown and "no rolling summary" in shown
    assert "last run none recorded" in shown
    data = json.loads(talk("show", "alpha", "--json"))
    assert [m["content"] for m in data["window"]] == ["We deploy on Fridays?", "No: never on Fridays."]
    assert data["window"][1]["role"] == "assistant" and data["summary"] is None and data["last_run"] is None


def test_search_by_keyword_with_time_bounds(talk):
    found = talk("search", "alpha", "fridays", "--match", "keyword")
    assert "We deploy on Fridays?" in found and "No: never on Fridays." in found and "recent" in found
    hits = json.loads(talk("search", "alpha", "deploy", "--match", "keyword", "--time-range", "day", "--json"))
    assert [hit["message"]["content"] for hit in hits["hits"]] == ["We deploy on Fridays?"]
    assert "no messages found" in talk("search", "alpha", "deploy", "--match", "keyword", "--until", "2000-01-01")
    assert json.loads(talk("search", "alpha", "deploy", "--match", "keyword", "--since", "2000-01-01T00:00",
                           "--json"))["hits"]


def test_search_explain_prints_why_each_match_was_found(talk, server):
    def explained() -> dict:
        with server.client() as memory:
            return {hit.message.id: hit for hit in memory.search("alpha", "deploy fridays", match="hybrid",
                                                                 include_window=True, explain=True).hits}

    # The scores move once the archive commits the two messages (BM25 then counts them among the tenant's):
    # the command's are compared with a search made before and after it that agree.
    wanted = explained()
    for _ in range(10):
        lines = talk("search", "alpha", "deploy fridays", "--match", "hybrid", "--include-window",
                     "--explain").splitlines()
        settled, wanted = wanted, explained()
        if settled == wanted:
            break
    assert lines[0].split() == ["RUN", "SCORE", "TIER", "KEYWORD", "BM25", "SEMANTIC", "SIMILARITY", "FUSED",
                                "RERANK", "ID", "ROLE", "CONTENT"]
    rows = {int(cells[9]): cells for cells in (line.split() for line in lines[2:])}
    assert rows.keys() == wanted.keys()
    for id_, hit in wanted.items():
        why = hit.explanation
        assert rows[id_][1:9] == [f"{hit.score:.3f}", why.tier,
                                  f"#{why.keyword_rank}" if why.keyword_rank else "-",
                                  f"{why.keyword_score:.3f}" if why.keyword_rank else "-",
                                  f"#{why.semantic_rank}" if why.semantic_rank else "-",
                                  f"{why.semantic_similarity:.3f}" if why.semantic_rank else "-",
                                  f"{why.fused_score:.4f}", "-"]
    assert {cells[2] for cells in rows.values()} == {"window"}
    explained = json.loads(talk("search", "alpha", "fridays", "--match", "keyword", "--explain", "--json"))
    assert [hit["explanation"]["keyword_rank"] for hit in explained["hits"]] == [1, 2]
    assert all(hit["explanation"] is None for hit in json.loads(
        talk("search", "alpha", "fridays", "--match", "keyword", "--json"))["hits"])


def test_compact_moves_older_messages_to_the_archive(make_server):
    server = make_server("--max-history-messages", "2")
    with server.client() as memory:
        for n in range(3):
            memory.append("s", [("user", f"question {n} about sandboxes"), ("assistant", f"answer {n}")])
    assert "moved 4 messages out of history.json" in ok("compact", "s", "--target", server.tcp)
    hits = json.loads(ok("search", "s", "sandboxes", "--match", "keyword", "--json", "--target", server.tcp))
    assert {hit["source"] for hit in hits["hits"]} == {"archive", "recent"}


def test_summarize_folds_and_prints_the_summary(make_server, llm_server):
    server = make_server("--llm-base-url", llm_server.base_url, "--summary-model", "sum", "--llm-max-retries", "0")
    llm_server.script("sum", summary_reply(["Do: deploy on Tuesdays"], topic="deploys"))
    with server.client() as memory:
        memory.append("s", [("user", "We deploy on Fridays?"), ("assistant", "No: Tuesdays.")])
    folded = ok("summarize", "s", "--target", server.tcp, "--timeout", "60")
    assert "folded 2 messages" in folded and "rule: Do: deploy on Tuesdays" in folded and "deploys" in folded
    shown = ok("show", "s", "--target", server.tcp)
    assert "rule: Do: deploy on Tuesdays" in shown and "by summarize, summarized 2 messages" in shown
    last_run = json.loads(ok("show", "s", "--json", "--target", server.tcp))["last_run"]
    assert (last_run["trigger"], last_run["outcome"], last_run["messages"]) == ("summarize", "summarized", 2)
    assert json.loads(ok("sessions", "--json", "--target", server.tcp))[0]["has_summary"] is True


def test_summarize_without_a_model_says_so(talk, server):
    stderr = refused("summarize", "alpha", "--target", server.tcp)
    assert "FAILED_PRECONDITION SUMMARY_MODEL_NOT_CONFIGURED" in stderr


def test_reset_and_remove_say_what_they_deleted(talk, server):
    assert "reset alpha: 2 messages from history.json, 2 from the archive" in talk("reset", "alpha", "--mode", "all")
    assert [s["message_count"] for s in json.loads(talk("sessions", "--json"))] == [0, 1]
    removed = json.loads(talk("remove", "beta", "--json"))
    assert removed["deleted"]["history_messages"] == 1
    assert [s["session_id"] for s in json.loads(talk("sessions", "--json"))] == ["alpha"]
    assert "NOT_FOUND SESSION_NOT_FOUND" in refused("show", "beta", "--target", server.tcp)


def test_delete_takes_messages_by_id_or_the_newest_from_every_store(talk, server):
    printed = talk("delete", "alpha", "--id", "1")
    assert "We deploy on Fridays?" in printed and "1 messages from history.json, 1 from the archive" in printed
    popped = json.loads(talk("delete", "alpha", "--last", "1", "--json"))
    assert [m["content"] for m in popped["messages"]] == ["No: never on Fridays."]
    assert "nothing was deleted" in talk("delete", "alpha", "--id", "1")
    with server.client() as memory:
        assert memory.list_messages("alpha").messages == []
        assert memory.search("alpha", "Fridays", match="keyword").hits == []
    assert "INVALID_ARGUMENT DELETE_TARGET_REQUIRED" in refused("delete", "alpha", "--last", "0", "--target",
                                                                 server.tcp)
    assert memsvc("delete", "alpha", "--target", server.tcp).returncode == 2, "--id or --last is required"


def test_lessons_list_show_edit_delete(talk, server):
    with server.client() as memory:
        kept = memory.record_error("web_fetch", "HTTP 403 Forbidden from cloudflare", "send a browser User-Agent",
                                   cause="bot protection", keywords=["cloudflare"]).record
        other = memory.record_error("shell", "jq: command not found", "install jq").record
    listed = talk("lessons", "list")
    assert kept.id in listed and other.id in listed and "web_fetch" in listed
    assert [r["id"] for r in json.loads(talk("lessons", "list", "--tool", "shell", "--json"))] == [other.id]
    assert [r["id"] for r in json.loads(talk("lessons", "list", "--query", "cloudflare", "--json"))] == [kept.id]
    shown = talk("lessons", "show", kept.id)
    assert "cause:     bot protection" in shown and "keywords:  cloudflare, error_type:permission" in shown
    edited = json.loads(talk("lessons", "edit", kept.id, "--action", "use the site's API", "--json"))
    assert edited["action"] == "use the site's API"
    assert "action:    from stdin" in talk("lessons", "edit", kept.id, "--action", "-", stdin="from stdin\n")
    assert f"deleted lesson {kept.id}" in talk("lessons", "delete", kept.id)
    assert "NOT_FOUND ERROR_RECORD_NOT_FOUND" in refused("lessons", "show", kept.id, "--target", server.tcp)
    assert [r["id"] for r in json.loads(talk("lessons", "list", "--json"))] == [other.id]


def test_the_token_comes_from_a_file(make_server, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = make_server("--token-file", str(token))
    assert "UNAUTHENTICATED MISSING_TOKEN" in refused("sessions", "--target", server.tcp)
    assert ok("sessions", "--target", server.tcp, "--token-file", str(token)).strip() == "no sessions"
    assert ok("sessions", "--target", server.unix, "--token-file", str(token)).strip() == "no sessions"


@pytest.mark.as_process
def test_a_server_that_is_down_is_unavailable(server):
    target = server.tcp
    server.kill()
    assert "UNAVAILABLE" in refused("sessions", "--target", target, "--timeout", "2")


def test_the_parser_has_every_command_of_the_issue():
    parser = build_parser()
    for argv in (["sessions"], ["show", "s"], ["search", "s", "q", "--match", "keyword"], ["compact", "s"],
                 ["summarize", "s"], ["reset", "s"], ["remove", "s"], ["delete", "s", "--last", "1"],
                 ["delete", "s", "--id", "3", "--id", "4"], ["lessons", "list"], ["lessons", "show", "i"],
                 ["lessons", "edit", "i", "--action", "a"], ["lessons", "delete", "i"]):
        assert parser.parse_args(argv).run is not None, argv
