"""Who may call what, for whom: the caller a call's bearer token names, the role each RPC needs, the tenant it acts for.

Owns the role every RPC needs (read: calls that only read; write: those that
change the caller's own memory; admin: the server-wide calls), how a caller
is found (`Access.caller`: open on loopback and unix sockets with neither
token_file nor tenants_file, one admin of the default tenant with
token_file, the tenants file's entries with tenants_file), the tenant a call
acts for (the caller's own; an admin of every tenant names one in the
`memsvc-tenant` metadata, which must be a tenant the file knows), and the
current call's tenant for the servicers (`tenant_of`). The same checks serve
gRPC (the interceptor here) and HTTP (http/gate.py). Must never log, echo or
store a token or the authorization header.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import inspect
import time
from collections.abc import Sequence

import grpc

from memsvc.app import App, Tenant
from memsvc.core.errors import MemsvcError, PermissionDenied, Unauthenticated
from memsvc.core.reasons import Reason
from memsvc.rpc import audit
from memsvc.rpc.handlers import Behaviour, Rewrapped, rewrap
from memsvc.rpc.instrument import observe_call
from memsvc.rpc.status import CODES, to_status
from memsvc.runtime import tracing
from memsvc.tenancy.tenants import ANY, DEFAULT, OPEN, SINGLE, Caller, Directory, Role

AUTHORIZATION = "authorization"
TENANT_METADATA = "memsvc-tenant"
"Request metadata (HTTP header) naming the tenant an admin of every tenant acts for."
SCHEME = "bearer"
OPEN_METHODS = ("/grpc.health.v1.Health/Check",)
"""Served without a token: probes cannot carry one. Health Watch needs a token on the main listeners:
streams held open by anyone would take the places (max_concurrent_rpcs) token holders need; the
health port serves Watch without one."""

_READ = ("GetContext", "Search", "GetSummary", "ListSessions", "ListMessages", "LookupErrors", "SearchErrors",
         "ListErrors", "ExportSession", "FitContext")
_WRITE = ("Append", "Compact", "Summarize", "Reset", "RemoveSession", "DeleteMessages", "ReplaceMessages",
          "RecordError", "UpdateErrorAction", "DeleteError", "ImportSession")
_ADMIN = ("GetServerInfo", "HoldSession", "ReleaseSession", "ListHeldSessions", "PauseSessionCreation",
          "ListTenants")
ROLES: dict[str, Role] = {**dict.fromkeys(_READ, "read"), **dict.fromkeys(_WRITE, "write"),
                          **dict.fromkeys(_ADMIN, "admin")}
"The role each memsvc RPC needs, by method name; any other method (health Watch, reflection) any caller may make."
FIT_WITH_SESSION: Role = "write"
"FitContext folding into a session's summary changes that session: write."

_CALLER: contextvars.ContextVar[tuple[Caller, str]] = contextvars.ContextVar("memsvc_caller")
"The current call's caller and the tenant it acts for, set around each servicer method."


class Access:
    """How callers are found: `directory` (tenants_file) or `token` (token_file), else open."""

    def __init__(self, *, token: bytes | None = None, directory: Directory | None = None):
        self.token = token
        self.directory = directory

    @property
    def open(self) -> bool:
        return self.token is None and self.directory is None

    def caller(self, authorization: str | bytes | None) -> Caller:
        """Who presents this authorization header; UNAUTHENTICATED when no one the server knows."""
        if self.open:
            return OPEN
        if authorization is None:
            raise Unauthenticated("this server requires 'authorization: Bearer <token>' (gRPC metadata or HTTP "
                                  "header)", reason=Reason.MISSING_TOKEN)
        text = authorization.decode("latin-1") if isinstance(authorization, bytes) else authorization
        scheme, _, presented = text.partition(" ")
        token = presented.strip().encode()
        if scheme.lower() == SCHEME:
            if self.directory is not None:
                found = self.directory.caller(token)
                if found is not None:
                    return found
            elif self.token is not None and hmac.compare_digest(token, self.token):
                return SINGLE
        raise Unauthenticated("the bearer token is not one this server accepts (unknown, expired or revoked)")

    def admit(self, method: str, authorization: str | bytes | None, tenant: str | None) -> tuple[Caller, str]:
        """The caller of `method` (a bare RPC name) and the tenant it acts for; raises when it may not call."""
        caller = self.caller(authorization)
        needed = ROLES.get(method)
        if needed is not None and not caller.may(needed):
            raise PermissionDenied(f"{method} needs the {needed} role; this token has {caller.role}",
                                   reason=Reason.ROLE_FORBIDS, metadata={"needed": needed, "role": caller.role})
        return caller, self._acting_for(caller, tenant)

    def audit_refusal(self, method: str, authorization: str | bytes | None, named: str | None, request: object,
                      refused: MemsvcError) -> None:
        """The audit line of a call refused before it ran (its token, role or tenant), with what is known of
        its caller: an audited call's refusals are what an audit log is most read for."""
        if method not in audit.AUDITED:
            return
        try:
            caller: Caller | None = self.caller(authorization)
        except MemsvcError:
            caller = None
        tenant = named or (caller.tenant if caller is not None else "")
        audit.record(method, caller, tenant, CODES[refused.kind].name, request)

    def _acting_for(self, caller: Caller, named: str | None) -> str:
        if caller.tenant != ANY:
            if named and named != caller.tenant:
                raise PermissionDenied(f"this token acts for tenant {caller.tenant!r} only; {TENANT_METADATA} may "
                                       "name another only for an admin of every tenant",
                                       reason=Reason.TENANT_FORBIDDEN)
            return caller.tenant
        if not named:
            return DEFAULT
        if self.directory is None or not self.directory.knows(named):
            raise PermissionDenied(f"{TENANT_METADATA} names {named!r}, which the tenants file does not name",
                                   reason=Reason.TENANT_FORBIDDEN)
        return named


def tenant_of() -> str:
    """The tenant the current call acts for (set by the interceptor or the HTTP gate)."""
    return _CALLER.get()[1]


def serving(app: App) -> Tenant:
    """The memory of the tenant the current call acts for."""
    return app.tenant(tenant_of())


def caller_of() -> Caller:
    return _CALLER.get()[0]


def acting(caller: Caller, tenant: str) -> contextvars.Token[tuple[Caller, str]]:
    """Make (caller, tenant) the current call's; the caller resets the token when the call ends."""
    tracing.annotate(**{"memsvc.tenant": tenant})
    return _CALLER.set((caller, tenant))


def done_acting(token: contextvars.Token[tuple[Caller, str]]) -> None:
    # A stream its reader abandoned is closed by asyncio's async-generator finalizer in a task of its own,
    # whose context never held the token: nothing of the call is current there to undo, and raising would
    # skip the rest of the stream's ending (its audit line, closing what it wraps).
    with contextlib.suppress(ValueError):
        _CALLER.reset(token)


def metadata_value(metadata: Sequence[tuple[str, str | bytes]] | None, key: str) -> str | None:
    """The first value of `key` in call metadata; None when there is none."""
    for name, value in metadata or ():
        if name == key:
            return value.decode("latin-1") if isinstance(value, bytes) else value
    return None


class Admission(grpc.aio.ServerInterceptor):
    """Every call but a health Check passes `access` (its token, its role, its tenant); the servicer runs with
    its caller and tenant current."""

    def __init__(self, access: Access):
        self._access = access
        self._open = Rewrapped()
        "An open server's wrapped handler of each method (every call's caller and tenant are the same there)."

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method in OPEN_METHODS:
            return handler
        metadata = handler_call_details.invocation_metadata
        named = metadata_value(metadata, TENANT_METADATA)
        if self._access.open and named in (None, "", DEFAULT):  # what `admit` would find, without asking it
            return self._wrapped_open(handler_call_details.method, handler)
        method = handler_call_details.method.rpartition("/")[2]
        authorization = metadata_value(metadata, AUTHORIZATION)
        try:
            caller, tenant = self._access.admit(method, authorization, named)
        except MemsvcError as refused:
            failure, status, access = refused, to_status(refused), self._access  # `refused` ends with the block

            def refuse(_: Behaviour) -> Behaviour:
                async def abort(request: object, context: grpc.aio.ServicerContext) -> None:
                    access.audit_refusal(method, authorization, named, request, failure)
                    await context.abort_with_status(status)
                return abort

            return rewrap(handler, refuse)
        return rewrap(handler, lambda behaviour: _as(method, caller, tenant, behaviour))

    def _wrapped_open(self, full_method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """What `intercept_service` makes of `handler` on an open server, made once per method."""
        def make(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
            method = full_method.rpartition("/")[2]
            return rewrap(handler, lambda behaviour: _as(method, OPEN, DEFAULT, behaviour))
        return self._open.get(full_method, handler, make)


def _as(method: str, caller: Caller, tenant: str, behaviour: Behaviour) -> Behaviour:
    """`behaviour` run with (caller, tenant) current, and audited (audit.py). A streaming handler is an
    async generator or, as grpcio's health Watch, a coroutine that writes through its context: that one
    is awaited like a unary call."""
    if inspect.isasyncgenfunction(behaviour):
        async def stream(request: object, context: grpc.aio.ServicerContext):  # type: ignore[no-untyped-def]
            token, outcome = acting(caller, tenant), "CANCELLED"
            try:
                async with contextlib.aclosing(behaviour(request, context)) as replies:
                    async for reply in replies:
                        yield reply
                outcome = "OK"
            except grpc.aio.AbortError:
                outcome = _code(context)
                raise
            finally:
                done_acting(token)
                audit.record(method, caller, tenant, outcome, request)
        return stream

    async def unary(request: object, context: grpc.aio.ServicerContext):  # type: ignore[no-untyped-def]
        token, outcome, reply, started = acting(caller, tenant), "CANCELLED", None, time.perf_counter()
        try:
            reply = await behaviour(request, context)
            outcome = "OK"
            return reply
        except grpc.aio.AbortError:
            outcome = _code(context)
            raise
        finally:
            done_acting(token)
            audit.record(method, caller, tenant, outcome, reply, request)
            observe_call(method, tenant, request, reply, time.perf_counter() - started)
    return unary


def _code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
