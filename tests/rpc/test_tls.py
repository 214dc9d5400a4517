"""TLS and mutual TLS on TCP, end to end: a throwaway CA, real certificates, a real server."""

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import MemsvcError
from tests.support.certificates import Authority, tls_flags

pytestmark = pytest.mark.in_process


def refused(client) -> grpc.StatusCode:
    with pytest.raises(MemsvcError) as caught:
        client.append("s", [("user", "should not land")], timeout=5)
    return caught.value.code


def test_tls_serves_tcp_encrypted_and_the_unix_socket_plain(make_server, server_files, authority):
    server = make_server(*tls_flags(server_files, mutual=False))
    with server.client(root_certificates=authority.pem) as secure:
        assert secure.append("s", [("user", "over tls")]).messages[0].id == 1
    with server.client() as plaintext:
        assert refused(plaintext) == grpc.StatusCode.UNAVAILABLE
    with server.client(root_certificates=Authority("someone else").pem) as wrong_trust:
        assert refused(wrong_trust) == grpc.StatusCode.UNAVAILABLE
    with server.client(server.unix) as local:
        assert [m.content for m in local.get_context("s").window] == ["over tls"]


def test_mutual_tls_admits_only_clients_the_ca_signed(make_server, server_files, authority):
    server = make_server(*tls_flags(server_files, mutual=True))
    key, chain = authority.issue("agent", ExtendedKeyUsageOID.CLIENT_AUTH)
    stranger_key, stranger_chain = Authority("rogue CA").issue("agent", ExtendedKeyUsageOID.CLIENT_AUTH)
    with server.client(root_certificates=authority.pem) as anonymous:
        assert refused(anonymous) == grpc.StatusCode.UNAVAILABLE
    with server.client(root_certificates=authority.pem, private_key=stranger_key,
                       certificate_chain=stranger_chain) as stranger:
        assert refused(stranger) == grpc.StatusCode.UNAVAILABLE
    assert not (server.data_dir / "sessions/s").exists()
    with server.client(root_certificates=authority.pem, private_key=key, certificate_chain=chain) as member:
        member.append("s", [("user", "mutually trusted")])
        assert [m.content for m in member.get_context("s").window] == ["mutually trusted"]


def test_the_health_port_stays_plaintext_for_probes(make_server, server_files):
    server = make_server(*tls_flags(server_files, mutual=True), "--health-listen", "127.0.0.1:0")
    with grpc.insecure_channel(server.health) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def start(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", "serve", "--data-dir", str(tmp_path / "data"),
                           "--listen", "127.0.0.1:0", *flags], check=False, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("drop, message", [
    ("key", "tls_cert_file and tls_key_file go together"),
    ("cert", "tls_cert_file and tls_key_file go together"),
])
def test_half_a_tls_setting_stops_the_start(tmp_path, server_files, drop, message):
    flags = tls_flags(server_files, mutual=False)
    index = flags.index(f"--tls-{drop}-file")
    result = start(tmp_path, *(flags[:index] + flags[index + 2:]))
    assert result.returncode == 2 and message in result.stderr


def test_a_client_ca_without_a_certificate_stops_the_start(tmp_path, server_files):
    result = start(tmp_path, "--tls-client-ca-file", str(server_files["ca"]))
    assert result.returncode == 2 and "tls_client_ca_file needs tls_cert_file" in result.stderr


def test_an_unreadable_key_file_stops_the_start_without_showing_secrets(tmp_path, server_files):
    missing = tmp_path / "gone.key"
    result = start(tmp_path, "--tls-cert-file", str(server_files["cert"]), "--tls-key-file", str(missing))
    assert result.returncode == 2
    assert f"tls_key_file {missing} cannot be read" in result.stderr
    assert "BEGIN" not in result.stderr


def test_a_key_that_does_not_match_the_certificate_stops_the_start(tmp_path, server_files, authority):
    other_key, _ = authority.issue("other", ExtendedKeyUsageOID.SERVER_AUTH)
    server_files["key"].write_bytes(other_key)
    result = start(tmp_path, *tls_flags(server_files, mutual=False))
    assert result.returncode == 2
    assert "not a matching PEM certificate and key" in result.stderr
