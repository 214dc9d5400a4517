"""The HTTP listener's guard against DNS rebinding: without a token it answers only IP addresses,
localhost and the names in http_allowed_hosts. Real curl against a real server, with `--resolve`
pointing a foreign name at 127.0.0.1 exactly as a rebinding page's DNS does."""

import subprocess

import pytest

from memsvc.http.hosts import AllowedHosts, host_name
from tests.support import curl, stored_sessions

pytestmark = pytest.mark.in_process

APPEND = {"session_id": "s", "messages": [{"role": "ROLE_USER", "content": "a secret"}]}
TOKEN = "t0ken-0123456789abcdef-0123456789"


def named(server, name: str) -> tuple[str, tuple[str, ...]]:
    """The listener's base URL under `name`, and the curl options that make `name` resolve to it."""
    port = server.http.rsplit(":", 1)[1]
    return f"http://{name}:{port}", ("--resolve", f"{name}:{port}:127.0.0.1")


def page_status(base: str, options: tuple[str, ...]) -> str:
    return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *options, f"{base}/"],
                          capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.mark.parametrize(("header", "name"), [
    ("127.0.0.1:8080", "127.0.0.1"), ("[::1]:8080", "::1"), ("[::1]", "::1"),
    ("Memsvc.Internal.:80", "memsvc.internal"), ("localhost", "localhost"), ("::1", "::1")])
def test_the_name_of_a_host_header(header, name):
    assert host_name(header) == name


def test_addresses_and_localhost_are_answered_and_other_names_only_when_listed():
    hosts = AllowedHosts(["memsvc.internal"], token_required=False)
    for admitted in ("127.0.0.1:8080", "10.1.2.3", "[::1]:8080", "localhost:8080", "app.localhost",
                     "MEMSVC.internal:8080"):
        assert hosts.admits(admitted), admitted
    for refused in ("rebind.example:8080", "localhost.example", "internal", "", None):
        assert not hosts.admits(refused), refused
    assert AllowedHosts(["*"], token_required=False).admits("rebind.example")
    assert AllowedHosts([], token_required=True).admits("rebind.example")


def test_a_foreign_name_is_refused_everything_and_nothing_is_stored(make_server):
    server = make_server("--http-listen", "127.0.0.1:0")
    base, options = named(server, "rebind.example")
    refused = curl.post(base, "MemoryService/Append", APPEND, options=options)
    assert (refused.status, refused.code, refused.reason) == (403, "permission_denied", "HOST_NOT_ALLOWED")
    assert "http_allowed_hosts" in refused.body["message"] and "rebind.example" in refused.body["message"]
    assert page_status(base, options) == "403"  # the dashboard's files too
    assert stored_sessions(server) == set()
    local, options = named(server, "localhost")
    assert curl.post(local, "MemoryService/Append", APPEND, options=options).status == 200
    assert curl.post(f"http://{server.http}", "MemoryService/GetContext", {"session_id": "s"}).status == 200


def test_a_listed_name_is_answered(make_server):
    server = make_server("--http-listen", "127.0.0.1:0", "--http-allowed-hosts", "memsvc.internal")
    base, options = named(server, "memsvc.internal")
    assert curl.post(base, "MemoryService/Append", APPEND, options=options).status == 200
    assert page_status(base, options) == "200"
    other, options = named(server, "rebind.example")
    assert curl.post(other, "MemoryService/ListSessions", {}, options=options).status == 403


def test_with_a_token_every_name_is_answered_since_a_rebinding_page_cannot_present_it(make_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = make_server("--http-listen", "127.0.0.1:0", "--token-file", str(token_file))
    base, options = named(server, "memsvc.example")
    assert curl.post(base, "MemoryService/Append", APPEND, options=options, token=TOKEN).status == 200
    missing = curl.post(base, "MemoryService/Append", APPEND, options=options)
    assert (missing.status, missing.reason) == (401, "MISSING_TOKEN")
