"""Connection options before or after the command, and MEMSVC_* variables as their defaults, each run as a real
`memsvc` process against a real server (token-protected, TLS with mutual authentication)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support import ROOT
from tests.support.certificates import tls_flags

pytestmark = pytest.mark.in_process


def memsvc(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, env={"COLUMNS": "200", "PATH": "", **variables}, check=False)


def listed(*args: str, **variables: str) -> list[str]:
    """The session ids `memsvc ... sessions ...` prints, asserting it succeeded."""
    done = memsvc(*args, **variables)
    assert done.returncode == 0, f"memsvc {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
    return [line.split()[0] for line in done.stdout.splitlines()[2:]]


@pytest.fixture
def guarded(make_server, tmp_path):
    """A token-protected server holding one session, and the token's file."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = make_server("--token-file", str(token))
    with server.client(token="s3cret") as memory:
        memory.append("alpha", [("user", "hello")])
    return server, token


def test_connection_options_go_before_or_after_the_command(guarded):
    server, token = guarded
    assert listed("--target", server.tcp, "--token-file", str(token), "sessions") == ["alpha"]
    assert listed("sessions", "--target", server.tcp, "--token-file", str(token)) == ["alpha"]
    assert listed("--target", server.tcp, "sessions", "--token-file", str(token)) == ["alpha"]
    lessons = memsvc("--target", server.tcp, "--token-file", str(token), "lessons", "list")
    assert lessons.returncode == 0 and lessons.stdout.strip() == "no lessons"
    shown = memsvc("--target", server.tcp, "--token-file", str(token), "show", "alpha")
    assert shown.returncode == 0 and "hello" in shown.stdout


def test_variables_are_the_defaults_and_an_option_wins(guarded, tmp_path):
    server, token = guarded
    variables = {"MEMSVC_TARGET": server.tcp, "MEMSVC_TOKEN_FILE": str(token)}
    assert listed("sessions", **variables) == ["alpha"]
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    refused = memsvc("sessions", **{**variables, "MEMSVC_TOKEN_FILE": str(wrong)})
    assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
    assert listed("--token-file", str(token), "sessions", **{**variables, "MEMSVC_TOKEN_FILE": str(wrong)}) == [
        "alpha"]
    assert listed("sessions", "--target", server.tcp, **{**variables, "MEMSVC_TARGET": "127.0.0.1:1"}) == ["alpha"]
    # After the command wins over before it.
    assert listed("--target", "127.0.0.1:1", "sessions", "--target", server.tcp, **variables) == ["alpha"]


def test_tls_files_come_from_variables(make_server, server_files, authority, tmp_path):
    server = make_server(*tls_flags(server_files, mutual=True))
    key, chain = authority.issue("operator", ExtendedKeyUsageOID.CLIENT_AUTH)
    (tmp_path / "op.key").write_bytes(key)
    (tmp_path / "op.crt").write_bytes(chain)
    with server.client(server.unix) as local:
        local.append("secured", [("user", "over mutual tls")])
    variables = {"MEMSVC_TARGET": server.tcp, "MEMSVC_CA_FILE": str(server_files["ca"]),
                 "MEMSVC_CERT_FILE": str(tmp_path / "op.crt"), "MEMSVC_KEY_FILE": str(tmp_path / "op.key")}
    assert listed("sessions", **variables) == ["secured"]
    without_certificate = {name: value for name, value in variables.items()
                           if name not in ("MEMSVC_CERT_FILE", "MEMSVC_KEY_FILE")}
    anonymous = memsvc("sessions", "--timeout", "3", **without_certificate)
    assert anonymous.returncode == 1 and "UNAVAILABLE" in anonymous.stderr


@pytest.mark.parametrize(("argv", "variables", "message"), [
    (["--target", "127.0.0.1:1", "serve"], {}, "--target is not an option of `memsvc serve`"),
    (["--tenant", "a", "import", "somewhere"], {}, "--tenant is not an option of `memsvc import`"),
    (["--target", "x", "reshard", "--shard", "a=b", "--next-proxy", "x", "--proxy", "y"], {},
     "--target is not an option of `memsvc reshard`"),
    (["sessions"], {"MEMSVC_TIMEOUT": "soon"}, "MEMSVC_TIMEOUT must be a float, not 'soon'"),
    (["--timeout", "soon", "sessions"], {}, "--timeout must be a float, not 'soon'"),
])
def test_misplaced_or_malformed_options_are_refused_before_any_call(argv, variables, message):
    done = memsvc(*argv, **variables)
    assert done.returncode == 2
    assert done.stderr.strip() == f"memsvc: {message}"
