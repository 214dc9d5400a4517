"""Tenants through real servers: two teams sharing one memsvc (and one PostgreSQL database), each with
write and read-only tokens, an admin of every tenant, quotas, the audit log, rotation, the HTTP/JSON
surface, the CLI, and the layout of a server that had no tenants before. Nothing of one tenant may be
visible to, or changeable by, the other."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from memsvc_client import MemsvcError
from tests.support import ROOT, ServerProcess, wait_for
from tests.support.lessons import PostgresBackend
from tests.support.llm_server import summary_reply
from tests.support.tenancy import write_tenants

pytestmark = pytest.mark.in_process

A_WRITE, A_READ, A_ADMIN = "token-a-write", "token-a-read", "token-a-admin"
B_WRITE, B_READ = "token-b-write", "token-b-read"
ADMIN = "token-admin-of-every-tenant"
TOKENS = [(A_WRITE, "a", "write"), (A_READ, "a", "read"), (A_ADMIN, "a", "admin"),
          (B_WRITE, "b", "write"), (B_READ, "b", "read"), (ADMIN, "*", "admin")]
LABELS = {A_WRITE: "a-ci", A_READ: "a-viewer", A_ADMIN: "a-ops", B_WRITE: "b-ci", B_READ: "b-viewer",
          ADMIN: "operator"}
ALL_TOKENS = [token for token, _, _ in TOKENS]


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    return write_tenants(tmp_path / "tenants.toml", TOKENS, labels=LABELS)


@pytest.fixture
def shared(make_server, tenants_file) -> ServerProcess:
    return make_server("--tenants-file", str(tenants_file), "--max-history-messages", "4")


def refused(call: Callable[[], Any]) -> MemsvcError:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value


def outcome(call: Callable[[Any, str], Any], client: Any, session_id: str) -> tuple[str, str, str]:
    """What `call(client, session_id)` answers, the session id taken out of it: (code, reason, message)."""
    try:
        reply = call(client, session_id)
    except MemsvcError as error:
        return error.code.name, error.reason, error.message.replace(session_id, "<id>")
    return "OK", "", repr(reply).replace(session_id, "<id>")


def contents(window) -> list[str]:
    return [message.content for message in window]


def talk(client, session_id: str, team: str) -> None:
    """Messages with words both teams use and one that is the team's own; enough to reach the archive."""
    client.append(session_id, [("user", f"{team} deploy rollback plan for the staging cluster"),
                               ("assistant", f"{team} rollback checklist agreed")])
    client.append(session_id, [("user", f"{team} chatter {n}") for n in range(6)])
    client.compact(session_id)
    client.append(session_id, [("user", f"{team} staging cluster rollback again")])


def test_two_tenants_with_the_same_session_id_see_only_their_own_memory(shared):
    with shared.client(token=A_WRITE) as a, shared.client(token=B_WRITE) as b:
        talk(a, "s", "alpha")
        talk(b, "s", "bravo")
        a.append("only-a", [("user", "alpha private notes")])

        for client, team, other in ((a, "alpha", "bravo"), (b, "bravo", "alpha")):
            window = contents(client.get_context("s").window)
            assert window and all(text.startswith(team) for text in window)
            for match in ("keyword", "semantic", "hybrid"):
                hits = client.search("s", "staging cluster rollback", match=match, include_window=True,
                                     limit=20).hits
                assert hits, match
                assert all(hit.message.content.startswith(team) for hit in hits), match
                assert not any(other in hit.message.content for hit in hits), match
            listed = [message.content for message in client.list_messages("s", page_size=100).messages]
            assert len(listed) == 9 and all(text.startswith(team) for text in listed)
            exported = list(client.export_session("s"))
            assert all(other not in str(part) for part in exported)
            assert team in str(exported)
            client.get_summary("s")  # no LLM: an empty summary, but of its own session

        assert sorted(s.session_id for s in a.list_sessions().sessions) == ["only-a", "s"]
        assert [s.session_id for s in b.list_sessions().sessions] == ["s"]

        # A session of the other tenant is answered exactly as one that does not exist.
        for call in (lambda c, sid: c.get_context(sid), lambda c, sid: c.list_messages(sid),
                     lambda c, sid: c.get_summary(sid), lambda c, sid: c.search(sid, "alpha", match="keyword"),
                     lambda c, sid: list(c.export_session(sid)), lambda c, sid: c.reset(sid),
                     lambda c, sid: c.remove_session(sid), lambda c, sid: c.delete_messages(sid, last=1),
                     lambda c, sid: c.compact(sid)):
            assert outcome(call, b, "only-a") == outcome(call, b, "never-was")
        assert contents(a.get_context("only-a").window) == ["alpha private notes"]

        # Reset and removal act on the caller's own session only.
        b.reset("s", "all")
        assert contents(b.get_context("s").window) == []
        assert contents(a.get_context("s").window)
        b.remove_session("s")
        assert sorted(s.session_id for s in a.list_sessions().sessions) == ["only-a", "s"]


def test_a_read_token_reads_and_every_write_needs_the_write_role(shared):
    with shared.client(token=A_WRITE) as writer, shared.client(token=A_READ) as reader:
        writer.append("s", [("user", "alpha readable")])
        exported = list(writer.export_session("s"))
        assert contents(reader.get_context("s").window) == ["alpha readable"]
        assert reader.search("s", "readable", match="keyword").hits
        assert [s.session_id for s in reader.list_sessions().sessions] == ["s"]
        assert list(reader.export_session("s"))
        reader.lookup_errors("git", "rejected")
        reader.list_errors()
        for write in (lambda: reader.append("s", [("user", "no")]), lambda: reader.reset("s"),
                      lambda: reader.record_error("git", "rejected: non-fast-forward", "git pull --rebase"),
                      lambda: reader.import_session(exported), lambda: reader.remove_session("s"),
                      lambda: reader.compact("s")):
            error = refused(write)
            assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_FORBIDS")
            assert "write role" in error.message and error.metadata.get("needed") == "write"
        error = refused(lambda: writer.pause_session_creation(1))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_FORBIDS")
        assert "admin role" in error.message
        assert contents(writer.get_context("s").window) == ["alpha readable"]


def test_an_admin_of_every_tenant_acts_for_the_one_it_names_and_a_tenant_admin_for_its_own_only(shared):
    with shared.client(token=A_WRITE) as a, shared.client(token=B_WRITE) as b:
        a.append("s", [("user", "alpha words")])
        b.append("s", [("user", "bravo words")])
    with shared.client(token=ADMIN, tenant="a") as for_a, shared.client(token=ADMIN, tenant="b") as for_b:
        assert contents(for_a.get_context("s").window) == ["alpha words"]
        assert contents(for_b.get_context("s").window) == ["bravo words"]
        for_b.append("s", [("user", "bravo words from the operator")])
        assert {"a", "b"} <= set(for_a.list_tenants().tenants)
    with shared.client(token=B_READ) as b:
        assert contents(b.get_context("s").window) == ["bravo words", "bravo words from the operator"]
    with shared.client(token=A_ADMIN, tenant="b") as crossing:
        error = refused(lambda: crossing.get_context("s"))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "TENANT_FORBIDDEN")
    with shared.client(token=A_ADMIN, tenant="a") as own:
        assert contents(own.get_context("s").window) == ["alpha words"]
        own.pause_session_creation(0)
        assert own.list_tenants().tenants == ["a"]  # another tenant's very name is not a tenant admin's to see
    with shared.client(token=ADMIN, tenant="nobody") as unknown:
        error = refused(lambda: unknown.get_context("s"))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "TENANT_FORBIDDEN")


def test_unknown_and_expired_tokens_are_unauthenticated(make_server, tmp_path):
    path = write_tenants(tmp_path / "tenants.toml", [("old", "a", "write"), ("new", "a", "write")],
                         expires={"old": "2020-01-01T00:00:00Z", "new": "2999-01-01T00:00:00Z"})
    server = make_server("--tenants-file", str(path))
    with server.client(token="new") as ok:
        ok.append("s", [("user", "fresh")])
    for token in ("old", "never-issued", None):
        with server.client(token=token) as client:
            assert refused(lambda: client.get_context("s")).code == grpc.StatusCode.UNAUTHENTICATED


def test_a_rewritten_file_rotates_tokens_without_a_restart_and_a_malformed_one_keeps_the_last_good(
        make_server, tmp_path):
    path = write_tenants(tmp_path / "tenants.toml", [("first", "a", "write")])
    server = make_server("--tenants-file", str(path))
    with server.client(token="first") as first:
        first.append("s", [("user", "before rotation")])
    write_tenants(path, [("second", "a", "write")])

    def works(token: str) -> bool:
        with server.client(token=token) as client:
            try:
                client.get_context("s")
            except MemsvcError as error:
                assert error.code == grpc.StatusCode.UNAUTHENTICATED
                return False
            return True

    wait_for(lambda: works("second"))
    assert not works("first")

    path.write_text("[[tokens]]\nsha256 = 'not hex'\n")
    wait_for(lambda: server.health_status("memsvc.tenants_file") == 2)  # NOT_SERVING
    problem = [entry for entry in server.logged("tenants file not taken; the last good one stays in force")]
    assert problem and "tokens[0]" in problem[0]["detail"] and "tenant" in problem[0]["detail"]
    assert works("second")
    assert server.health_status() == 1  # SERVING: every token in force still is
    write_tenants(path, [("second", "a", "write")])
    wait_for(lambda: server.health_status("memsvc.tenants_file") == 1)




def lesson_never_crosses(a_server: ServerProcess, b_server: ServerProcess, a_again: ServerProcess) -> None:
    with a_server.client(token=A_WRITE) as a, b_server.client(token=B_WRITE) as b:
        recorded = a.record_error("web_fetch", "HTTP 403 Forbidden from cloudflare",
                                  "send a browser User-Agent header", keywords=["cloudflare"])
        b.record_error("git", "rejected: non-fast-forward", "git pull --rebase")
        found = b.lookup_errors("web_fetch", "GET https://example.test failed: HTTP 403 Forbidden")
        assert (list(found.records), found.related_errors) == ([], "")
        assert list(b.search_errors("cloudflare").records) == []
        assert [r.tool_name for r in b.list_errors().records] == ["git"]
        error = refused(lambda: b.delete_error(recorded.record.id))
        missing = refused(lambda: b.delete_error("0" * len(recorded.record.id)))
        assert (error.code, error.reason) == (missing.code, missing.reason)
        error = refused(lambda: b.update_error_action(recorded.record.id, "something else"))
        assert (error.code, error.reason) == (missing.code, missing.reason)
    with a_again.client(token=A_WRITE) as a:
        found = a.lookup_errors("web_fetch", "GET https://example.test failed: HTTP 403 Forbidden")
        assert [r.id for r in found.records] == [recorded.record.id]
        assert "User-Agent" in found.related_errors
        assert [r.tool_name for r in a.list_errors().records] == ["web_fetch"]


def test_a_lesson_of_one_tenant_is_never_returned_to_another_on_sqlite(shared):
    lesson_never_crosses(shared, shared, shared)


def test_a_lesson_of_one_tenant_is_never_returned_to_another_on_postgres_two_servers_one_database(
        make_server, postgres, postgres_database, tenants_file, tmp_path):
    backend = PostgresBackend(postgres, postgres_database)
    one, two = (make_server("--tenants-file", str(tenants_file), *backend.server_args, directory=tmp_path / name)
                for name in ("one", "two"))
    lesson_never_crosses(one, two, two)
    assert sorted(backend.column("tenant")) == ["a", "b"]

    # Removing a tenant takes its rows out of the shared database, and no other tenant's.
    for server in (one, two):
        server.terminate()
    memsvc("tenants", "remove", "b", "--tenants-file", str(tenants_file), "--data-dir", str(two.data_dir),
           *backend.server_args)
    assert backend.column("tenant") == ["a"]


def test_export_from_one_tenant_imports_into_the_tenant_named_and_a_writer_imports_into_its_own(shared):
    with shared.client(token=A_WRITE) as a, shared.client(token=B_WRITE) as b:
        a.append("moving", [("user", "alpha history to hand over")])
        exported = list(a.export_session("moving"))
        assert exported[0].head.tenant == "a"
        with shared.client(token=ADMIN, tenant="b") as for_b:
            assert for_b.import_session(exported).session_id == "moving"
        assert contents(b.get_context("moving").window) == ["alpha history to hand over"]
        b.remove_session("moving")
        assert b.import_session(exported).session_id == "moving"  # a writer into its own tenant
        assert contents(b.get_context("moving").window) == ["alpha history to hand over"]
        a.remove_session("moving")
        assert a.import_session(exported).session_id == "moving"
        assert [s.session_id for s in a.list_sessions().sessions] == ["moving"]
    with shared.client(token=A_ADMIN, tenant="b") as crossing:
        error = refused(lambda: crossing.import_session(exported))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "TENANT_FORBIDDEN")


def clear_of_a_measurement() -> None:
    """Wait, if need be, until the next few seconds hold no measurement of the tenants' bytes (a job at
    each minute's start): one taken while an import is staged, or before its index rows are merged away,
    counts them until the next, a minute later, and the checks that follow are of what imports add."""
    second = datetime.now(UTC).second
    if second >= 45:
        time.sleep(62 - second)


def test_quotas_refuse_with_tenant_quota_and_store_nothing_half(make_server, tmp_path):
    path = write_tenants(tmp_path / "tenants.toml", [(A_WRITE, "a", "write"), (B_WRITE, "b", "write"),
                                                      (ADMIN, "*", "admin")],
                         quotas={"a": {"max_sessions": 2}, "b": {"max_bytes": 300_000}})
    server = make_server("--tenants-file", str(path))
    with server.client(token=A_WRITE) as a, server.client(token=B_WRITE) as b:
        a.append("one", [("user", "1")])
        a.append("two", [("user", "2")])
        error = refused(lambda: a.append("three", [("user", "3")]))
        assert (error.code, error.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TENANT_QUOTA")
        assert "max_sessions" in error.message and error.metadata.get("quota") == "max_sessions"
        assert sorted(s.session_id for s in a.list_sessions().sessions) == ["one", "two"]
        a.append("one", [("user", "an existing session still grows")])
        b.append("three", [("user", "b has no session quota")])

        b.append("big", [("user", "x" * 1000)])  # an empty tenant's stores take some 75 kB already
        error = refused(lambda: b.append("big", [("user", "y" * 100_000), ("assistant", "z" * 150_000)]))
        assert (error.code, error.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TENANT_QUOTA")
        assert "max_bytes" in error.message and error.metadata.get("quota") == "max_bytes"
        assert [len(m.content) for m in b.list_messages("big").messages] == [1000]
        exported = list(b.export_session("big"))
        error = refused(lambda: a.import_session(exported))  # a third session of a
        assert (error.reason, error.metadata.get("quota")) == ("TENANT_QUOTA", "max_sessions")
        assert sorted(s.session_id for s in a.list_sessions().sessions) == ["one", "two"]

        # An import past max_bytes is refused whole: no session, nothing staged.
        a.append("two", [("user", "w" * 100_000), ("assistant", "v" * 150_000)])  # a has no byte quota
        clear_of_a_measurement()
        with server.client(token=ADMIN, tenant="b") as for_b:
            # a page at a time: the 100 kB page fits, the 150 kB one does not
            error = refused(lambda: for_b.import_session(a.export_session("two", page_size=1)))
        assert (error.reason, error.metadata.get("quota")) == ("TENANT_QUOTA", "max_bytes")
        assert sorted(s.session_id for s in b.list_sessions().sessions) == ["big", "three"]
        assert sorted(entry.name for entry in (server.data_dir / "tenants" / "b" / "sessions").iterdir()) == [
            "big", "three"]
        b.append("big", [("user", "q" * 150_000)])  # nor is the refused import's first page counted as stored


def test_the_audit_log_has_one_line_per_destructive_or_admin_call_and_never_a_token(shared):
    with shared.client(token=A_WRITE) as a, shared.client(token=B_READ) as b:
        a.append("s", [("user", "alpha")])
        exported = list(a.export_session("s"))
        a.reset("s", "all")
        a.remove_session("s")
        refused(lambda: b.remove_session("s"))
        a.import_session(exported)
        recorded = a.record_error("git", "rejected: non-fast-forward", "git pull --rebase").record
        a.update_error_action(recorded.id, "git fetch then rebase")
        a.delete_error(recorded.id)
    with shared.client(token=ADMIN, tenant="b") as admin:
        admin.pause_session_creation(0)
        refused(lambda: admin.remove_session("missing"))
    wait_for(lambda: len(shared.logged("audit")) >= 9)
    lines = [(e["rpc"], e["tenant"], e["token"], e["session"], e["outcome"]) for e in shared.logged("audit")]
    assert lines == [
        ("ExportSession", "a", "a-ci", "s", "OK"),
        ("Reset", "a", "a-ci", "s", "OK"),
        ("RemoveSession", "a", "a-ci", "s", "OK"),
        ("RemoveSession", "b", "b-viewer", "s", "PERMISSION_DENIED"),
        ("ImportSession", "a", "a-ci", "s", "OK"),
        ("UpdateErrorAction", "a", "a-ci", "", "OK"),
        ("DeleteError", "a", "a-ci", "", "OK"),
        ("PauseSessionCreation", "b", "operator", "", "OK"),
        ("RemoveSession", "b", "operator", "missing", "NOT_FOUND"),
    ]
    text = "".join(shared.log_lines)
    assert not any(token in text for token in ALL_TOKENS)


def http_call(server: ServerProcess, service: str, method: str, body: dict, token: str | None,
              tenant: str | None = None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    if tenant:
        headers["memsvc-tenant"] = tenant
    return httpx.post(f"http://{server.http}/memsvc.v1.{service}/{method}", json=body, headers=headers, timeout=10)


def settled(read: Callable[[], Any]) -> Any:
    """What `read` gives once it gives the same twice, an archive commit apart: the archive counts messages
    (recent ones too) when it commits them, so keyword scores move until then."""
    last = read()
    while True:
        time.sleep(1.5)  # archive_commit_seconds is 1
        now = read()
        if now == last:
            return now
        last = now


def test_the_http_json_surface_enforces_the_same_tenants_and_roles(make_server, tmp_path):
    tenants_file = write_tenants(tmp_path / "tenants.toml", TOKENS, labels=LABELS)
    server = make_server("--tenants-file", str(tenants_file), "--http-listen", "127.0.0.1:0")

    def call(method: str, body: dict, token: str | None, tenant: str | None = None,
             service: str = "MemoryService") -> httpx.Response:
        return http_call(server, service, method, body, token, tenant)

    def window(token: str, tenant: str | None = None) -> list[str]:
        reply = call("GetContext", {"sessionId": "s"}, token, tenant)
        assert reply.status_code == 200, reply.text
        return [message["content"] for message in reply.json().get("window", [])]

    assert call("Append", {"sessionId": "s", "messages": [{"role": "ROLE_USER", "content": "alpha over http"}]},
                A_WRITE).status_code == 200
    assert call("Append", {"sessionId": "s", "messages": [{"role": "ROLE_USER", "content": "bravo over http"}]},
                B_WRITE).status_code == 200
    assert window(A_READ) == ["alpha over http"]
    assert window(B_READ) == ["bravo over http"]
    assert window(ADMIN, "a") == ["alpha over http"]
    listed = call("ListSessions", {}, B_READ).json()
    assert [s["sessionId"] for s in listed["sessions"]] == ["s"]
    search = call("Search", {"sessionId": "s", "query": "http", "match": "MATCH_KEYWORD"}, B_READ).json()
    assert "alpha" not in json.dumps(search)

    denied = call("Append", {"sessionId": "s", "messages": [{"role": "ROLE_USER", "content": "no"}]}, A_READ)
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    assert "write role" in denied.json()["message"]
    assert call("GetContext", {"sessionId": "s"}, A_ADMIN, "b").status_code == 403
    assert call("RemoveSession", {"sessionId": "s"}, A_READ).status_code == 403
    wait_for(lambda: server.logged("audit"))
    assert [(e["rpc"], e["tenant"], e["token"], e["session"], e["outcome"]) for e in server.logged("audit")] == [
        ("RemoveSession", "a", "a-viewer", "s", "PERMISSION_DENIED")]
    assert call("GetContext", {"sessionId": "s"}, "not-a-token").status_code == 401
    assert call("GetContext", {"sessionId": "s"}, None).status_code == 401
    lessons = call("RecordError", {"toolName": "git", "symptom": "rejected", "action": "pull",
                                      "outcome": "OUTCOME_RESOLVED"}, B_WRITE,
                   service="ErrorMemoryService")
    assert lessons.status_code == 200, lessons.text
    assert call("ListErrors", {}, A_READ, service="ErrorMemoryService").json().get("records", []) == []
    assert window(A_READ) == ["alpha over http"]


def memsvc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert not check or done.returncode == 0, done.stderr
    return done


def test_the_cli_adds_tokens_acts_with_a_token_file_and_removes_a_tenant_whole(make_server, tmp_path):
    path = tmp_path / "tenants.toml"
    a_token = memsvc("tenants", "add-token", "a", "write", "--tenants-file", str(path), "--label", "a-ci").stdout
    b_token = memsvc("tenants", "add-token", "b", "write", "--tenants-file", str(path)).stdout
    a_token, b_token = a_token.strip(), b_token.strip()
    assert len(a_token) >= 32 and a_token not in path.read_text() and b_token not in path.read_text()
    listing = memsvc("tenants", "list", "--tenants-file", str(path)).stdout
    assert "tenant a  role write  a-ci" in listing and a_token not in listing

    server = make_server("--tenants-file", str(path))
    later = memsvc("tenants", "add-token", "a", "read", "--tenants-file", str(path)).stdout.strip()
    with server.client(token=a_token) as a, server.client(token=b_token) as b:
        a.append("s", [("user", "alpha by cli")])
        b.append("s", [("user", "bravo kept apart")])
        b.record_error("git", "rejected: non-fast-forward", "git pull --rebase")

    def reads(token: str) -> bool:
        with server.client(token=token) as client:
            try:
                return contents(client.get_context("s").window) == ["alpha by cli"]
            except MemsvcError:
                return False

    wait_for(lambda: reads(later))
    a_file, b_file = tmp_path / "a.token", tmp_path / "b.token"
    a_file.write_text(a_token + "\n")
    b_file.write_text(b_token + "\n")
    shown = memsvc("show", "s", "--target", server.tcp, "--token-file", str(a_file)).stdout
    assert "alpha by cli" in shown and "bravo" not in shown
    sessions = memsvc("sessions", "--target", server.tcp, "--token-file", str(b_file), "--json").stdout
    assert "bravo" not in sessions and '"s"' in sessions
    read_file = tmp_path / "read.token"
    read_file.write_text(later)
    denied = memsvc("reset", "s", "--target", server.tcp, "--token-file", str(read_file), check=False)
    assert denied.returncode == 1 and "ROLE_FORBIDS" in denied.stderr
    admin_file = tmp_path / "admin.token"
    admin_file.write_text(memsvc("tenants", "add-token", "*", "admin", "--tenants-file", str(path)).stdout)
    wait_for(lambda: memsvc("show", "s", "--target", server.tcp, "--token-file", str(admin_file), "--tenant", "b",
                            check=False).returncode == 0)
    shown = memsvc("show", "s", "--target", server.tcp, "--token-file", str(admin_file), "--tenant", "b").stdout
    assert "bravo kept apart" in shown and "alpha" not in shown

    b_dir = server.data_dir / "tenants" / "b"
    assert b_dir.is_dir()
    running = memsvc("tenants", "remove", "b", "--tenants-file", str(path), "--data-dir", str(server.data_dir),
                     check=False)
    assert running.returncode != 0 and b_dir.is_dir()  # the server holds the data directory
    server.terminate()
    memsvc("tenants", "remove", "b", "--tenants-file", str(path), "--data-dir", str(server.data_dir))
    assert not b_dir.exists() and '"b"' not in path.read_text()
    server.start()
    with server.client(token=b_token) as b:
        assert refused(lambda: b.get_context("s")).code == grpc.StatusCode.UNAUTHENTICATED
    with server.client(token=a_token) as a:
        assert contents(a.get_context("s").window) == ["alpha by cli"]


def test_keyword_scores_of_one_tenant_do_not_depend_on_another_tenants_messages(shared):
    with shared.client(token=A_WRITE) as a, shared.client(token=B_WRITE) as b:
        talk(a, "s", "alpha")

        def scores(client) -> list[tuple[int, str, float]]:
            hits = client.search("s", "staging rollback", match="keyword", include_window=True, limit=20).hits
            return [(hit.message.id, hit.source, hit.score) for hit in hits]

        before = settled(lambda: scores(a))
        assert {source for _, source, _ in before} == {"archive", "recent"}
        for n in range(20):
            talk(b, f"noise-{n}", "bravo")
        b.append("s", [("user", "staging rollback " * 50)])
        settled(lambda: scores(b))  # b's messages are in its archive's counts: with one archive, a's would move
        assert scores(a) == before


def test_without_a_tenants_file_the_layout_stays_and_the_first_start_with_one_serves_it_as_default(
        make_server, tmp_path):
    server = make_server()
    with server.client() as client:
        client.append("existing", [("user", "stored before tenants")])
    with server.client(tenant="default") as named_default, server.client(tenant="a") as elsewhere:
        assert contents(named_default.get_context("existing").window) == ["stored before tenants"]
        error = refused(lambda: elsewhere.get_context("existing"))  # an open server has one tenant
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "TENANT_FORBIDDEN")
    assert (server.data_dir / "sessions").is_dir() and not (server.data_dir / "tenants").exists()
    server.terminate()
    path = write_tenants(tmp_path / "tenants.toml", [("default-writer", "default", "write"), ("a", "a", "write"),
                                                      (ADMIN, "*", "admin")])
    server.args = ["--tenants-file", str(path)]
    server.start()
    with server.client(token="default-writer") as default, server.client(token="a") as a, \
            server.client(token=ADMIN) as admin:
        assert contents(default.get_context("existing").window) == ["stored before tenants"]
        assert contents(admin.get_context("existing").window) == ["stored before tenants"]
        assert [s.session_id for s in a.list_sessions().sessions] == []
        a.append("new", [("user", "a's own")])
    assert (server.data_dir / "sessions" / "existing").is_dir()
    assert not (server.data_dir / "sessions" / "new").exists()


def test_a_summary_belongs_to_its_tenants_session(make_server, tenants_file, llm_server):
    server = make_server("--tenants-file", str(tenants_file), "--llm-base-url", llm_server.base_url,
                         "--summary-model", "sum", "--llm-max-retries", "0")
    llm_server.script("sum", summary_reply(["Do: keep alpha's plans"], topic="alpha launch"))
    with server.client(token=A_WRITE) as a, server.client(token=B_WRITE) as b:
        a.append("s", [("user", "alpha launch plans"), ("assistant", "noted")])
        b.append("s", [("user", "bravo budget talk"), ("assistant", "noted")])
        assert a.summarize("s", timeout=30).count == 2
        assert a.get_summary("s").summary.current_discussion.topic == "alpha launch"
        assert b.get_summary("s").summary is None
        assert b.get_context("s").turn_context is None
        assert "alpha launch" in a.get_context("s").turn_context.content
        assert "bravo" not in llm_server.calls("sum")[0].user
