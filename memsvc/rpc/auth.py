"""The secrets a server starts with: token_file's token and TLS on TCP.

Owns reading the files named by `token_file` and `tls_*_file` (once, at
start) and the server's TLS credentials; who may call what is access.py's.
Must never log, echo or store a token or a key: errors name the setting and
the file, never what is in it.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidSetting
from memsvc.rpc.access import Access
from memsvc.tenancy.tenants import Directory


def _read(setting: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidSetting(f"{setting} {path} cannot be read: {exc.strerror}") from exc


def read_token(path: str) -> bytes:
    """The token in `path`, surrounding whitespace stripped; an empty file is an error, not "no auth"."""
    token = _read("token_file", path).strip()
    if not token:
        raise InvalidSetting(f"token_file {path} is empty: write the token into it, or unset token_file")
    return token


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS for TCP listeners, mutual when a client CA is set; None when TLS is off."""
    if not settings.tls_cert_file:
        return None
    chain = _read("tls_cert_file", settings.tls_cert_file)
    key = _read("tls_key_file", settings.tls_key_file)
    client_ca = _read("tls_client_ca_file", settings.tls_client_ca_file) if settings.tls_client_ca_file else None
    return grpc.ssl_server_credentials([(key, chain)], root_certificates=client_ca,
                                       require_client_auth=client_ca is not None)


def access_from_settings(settings: Settings) -> Access:
    """Who may call: the tenants file's tokens, token_file's one token, or anyone (neither set)."""
    if settings.tenants_file:
        return Access(directory=Directory(Path(settings.tenants_file)))
    if settings.token_file:
        return Access(token=read_token(settings.token_file))
    return Access()
