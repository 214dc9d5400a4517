"""Who may call: the bearer token every RPC but a health Check must carry, and TLS on TCP.

Owns reading the secrets named by `token_file` and `tls_*_file` (once, at
start), the check of `authorization: Bearer <token>` in constant time
(`refusal`, which memsvc/http shares), the interceptor that applies it, and
the server's TLS credentials. Must never log, echo or
store a token, a key or the authorization header: errors name the setting
and the file, never what is in it.
"""

from __future__ import annotations

import hmac
from pathlib import Path

import grpc

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidSetting, Unauthenticated
from memsvc.core.reasons import Reason
from memsvc.rpc.handlers import Behaviour, rewrap
from memsvc.rpc.status import to_status

AUTHORIZATION = "authorization"
SCHEME = "bearer"
OPEN_METHODS = ("/grpc.health.v1.Health/Check",)
"""Served without a token: probes cannot carry one. Health Watch needs the token on the main listeners:
streams held open by anyone would take the places (max_concurrent_rpcs) token holders need; the
health port serves Watch without one."""


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


def _authorization(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | bytes | None:
    """The value of the first authorization header; None when there is none."""
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            return value
    return None


def refusal(token: bytes, authorization: str | bytes | None) -> Unauthenticated | None:
    """Why a call carrying this authorization header (None: no header) may not pass; None when it may.

    The one token check, shared by the gRPC interceptor and the HTTP listener.
    """
    if authorization is None:
        return Unauthenticated("this server requires 'authorization: Bearer <token>' (gRPC metadata or HTTP header)",
                               reason=Reason.MISSING_TOKEN)
    text = authorization.decode("latin-1") if isinstance(authorization, bytes) else authorization
    scheme, _, presented = text.partition(" ")
    if scheme.lower() != SCHEME or not hmac.compare_digest(presented.strip().encode(), token):
        return Unauthenticated("the bearer token is not the one this server was started with")
    return None


class BearerToken(grpc.aio.ServerInterceptor):
    """Refuses every call but a health Check unless it carries the token."""

    def __init__(self, token: bytes):
        self._token = token

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method in OPEN_METHODS:
            return handler
        refused = refusal(self._token, _authorization(handler_call_details.invocation_metadata))
        if refused is None:
            return handler
        status = to_status(refused)

        def refuse(_: Behaviour) -> Behaviour:
            async def abort(_request: object, context: grpc.aio.ServicerContext) -> None:
                await context.abort_with_status(status)
            return abort

        return rewrap(handler, refuse)
