"""A throwaway certificate authority for the TLS tests: real keys and certificates, in PEM.

Import the `authority` and `server_files` fixtures into a test module (they are registered for
the whole suite) and pass `tls_flags(server_files, mutual)` to a server.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Authority:
    """A CA that signs leaf certificates, all in PEM bytes."""

    def __init__(self, name: str):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.certificate = self._builder(self.name, self.key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(self.key, hashes.SHA256())
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM)

    def _builder(self, subject: x509.Name, public_key) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(self.name).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1)))

    def issue(self, name: str, usage: x509.ObjectIdentifier) -> tuple[bytes, bytes]:
        """(private key, certificate) for `name`, valid for 127.0.0.1 and localhost."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), key.public_key())
                       .add_extension(x509.SubjectAlternativeName([
                           x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
                       .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                       .sign(self.key, hashes.SHA256()))
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return key_pem, certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority("memsvc test CA")


@pytest.fixture
def server_files(tmp_path: Path, authority: Authority) -> dict[str, Path]:
    key, chain = authority.issue("memsvc", ExtendedKeyUsageOID.SERVER_AUTH)
    files = {"key": tmp_path / "server.key", "cert": tmp_path / "server.crt", "ca": tmp_path / "clients-ca.crt"}
    files["key"].write_bytes(key)
    files["cert"].write_bytes(chain)
    files["ca"].write_bytes(authority.pem)
    return files


def tls_flags(files: dict[str, Path], mutual: bool) -> list[str]:
    flags = ["--tls-cert-file", str(files["cert"]), "--tls-key-file", str(files["key"])]
    return flags + (["--tls-client-ca-file", str(files["ca"])] if mutual else [])
