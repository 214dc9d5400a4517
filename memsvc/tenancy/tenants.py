"""The tenants file: which bearer tokens exist, whose tenant each serves with which role, and each tenant's quotas.

    [[tokens]]
    sha256 = "9f86d0...08"      # hex SHA-256 of the token: the file never holds a token
    tenant = "team-a"           # or "*": an admin of every tenant
    role = "write"              # read | write | admin
    label = "team-a ci"         # optional, for logs
    expires = 2027-01-01T00:00:00Z   # optional, RFC 3339

    [[tenants]]
    name = "team-a"
    max_sessions = 1000         # optional quotas, counted per server
    max_bytes = 10_000_000_000

Owns its format and its checks (every entry whole and valid, or the file is
refused with the entry named), who a presented token is (`Directory.caller`),
tenant names, and following the file as it changes: `refresh` reads it again
when it changed, and a file that does not check out leaves the last good one
in force and says why (`problem`, for the log and health). Must never hold,
log or compare a token itself, only its SHA-256, nor know a transport.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import tomllib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec

from memsvc.core.errors import InvalidSetting

log = logging.getLogger(__name__)

Role = Literal["read", "write", "admin"]
RANKS: dict[str, int] = {"read": 0, "write": 1, "admin": 2}
"Each role may do what the roles below it may."
DEFAULT = "default"
"The tenant of a server without a tenants file, and of every existing session when one is first set."
ANY = "*"
"A token's tenant meaning every tenant: an admin naming the tenant it acts for in each call."
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class TokenEntry(msgspec.Struct, forbid_unknown_fields=True):
    sha256: str
    tenant: str
    role: Role
    label: str = ""
    expires: datetime | None = None


class TenantEntry(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    max_sessions: int = 0
    "0: no quota of its own (the server's max_sessions still applies)."
    max_bytes: int = 0
    "Bytes of stored history, archive and vectors; 0: none."


class TenantsFile(msgspec.Struct, forbid_unknown_fields=True):
    tokens: list[TokenEntry] = []
    tenants: list[TenantEntry] = []


class Caller(msgspec.Struct, frozen=True):
    """Who a call comes from, as its token says."""

    tenant: str
    "A tenant's name, or ANY."
    role: Role
    label: str = ""

    def may(self, needed: Role) -> bool:
        return RANKS[self.role] >= RANKS[needed]


OPEN = Caller(DEFAULT, "admin", "open")
"Every caller of a server with neither token_file nor tenants_file: on loopback and unix sockets only."
SINGLE = Caller(DEFAULT, "admin", "token_file")
"The holder of token_file's token: the one tenant's admin."


def is_tenant_name(name: str) -> bool:
    return TENANT_NAME.fullmatch(name) is not None


def digest(token: bytes) -> str:
    return hashlib.sha256(token).hexdigest()


def parse(data: bytes, source: str) -> TenantsFile:
    """The file's entries, each checked; InvalidSetting naming the first wrong one."""
    try:
        parsed = msgspec.convert(tomllib.loads(data.decode("utf-8")), TenantsFile)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise InvalidSetting(f"tenants_file {source} cannot be read: {exc}") from None
    seen: set[str] = set()
    for number, token in enumerate(parsed.tokens, start=1):
        where = f"tenants_file {source}, token {number}" + (f" ({token.label})" if token.label else "")
        if not _SHA256.fullmatch(token.sha256):
            raise InvalidSetting(f"{where}: sha256 must be 64 lower-case hex digits (the SHA-256 of the token)")
        if token.sha256 in seen:
            raise InvalidSetting(f"{where}: the same token is listed twice")
        seen.add(token.sha256)
        if token.tenant != ANY and not is_tenant_name(token.tenant):
            raise InvalidSetting(f"{where}: tenant {token.tenant!r} is not a name (1-63 of a-z 0-9 _ . -, starting "
                                 "with a letter or digit) nor '*'")
        if token.tenant == ANY and token.role != "admin":
            raise InvalidSetting(f"{where}: a token of every tenant ('*') must be an admin's")
        if token.expires is not None and token.expires.tzinfo is None:
            raise InvalidSetting(f"{where}: expires needs a time zone (RFC 3339, e.g. 2027-01-01T00:00:00Z)")
    names: set[str] = set()
    for tenant in parsed.tenants:
        if not is_tenant_name(tenant.name) or tenant.name in names:
            raise InvalidSetting(f"tenants_file {source}: [[tenants]] name {tenant.name!r} is not a name, or is "
                                 "listed twice")
        if tenant.max_sessions < 0 or tenant.max_bytes < 0:
            raise InvalidSetting(f"tenants_file {source}: tenant {tenant.name!r} has a negative quota")
        names.add(tenant.name)
    return parsed


class _Loaded(msgspec.Struct, frozen=True):
    tokens: dict[str, TokenEntry]
    quotas: dict[str, TenantEntry]
    names: frozenset[str]
    "Every tenant named by a token or a quota, and the default one."
    stamp: tuple[int, int, int]
    "The file's (inode, size, mtime) when read."


class Directory:
    """The tenants file in force, read again by `refresh` when it changed."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = path
        self.clock = clock
        self.problem: str | None = None
        "Why the file on disk is not in force (the last good one is), or None."
        self._loaded = self._load()  # at start a bad file stops the server (InvalidSetting)

    def _stamp(self) -> tuple[int, int, int]:
        stat = self.path.stat()
        return stat.st_ino, stat.st_size, stat.st_mtime_ns

    def _load(self) -> _Loaded:
        try:
            stamp, data = self._stamp(), self.path.read_bytes()
        except OSError as exc:
            raise InvalidSetting(f"tenants_file {self.path} cannot be read: {exc.strerror}") from None
        parsed = parse(data, str(self.path))
        names = {token.tenant for token in parsed.tokens if token.tenant != ANY}
        names |= {tenant.name for tenant in parsed.tenants} | {DEFAULT}
        return _Loaded({token.sha256: token for token in parsed.tokens},
                       {tenant.name: tenant for tenant in parsed.tenants}, frozenset(names), stamp)

    def refresh(self) -> None:
        """Read the file again if it changed; a file that does not check out keeps the last good one."""
        try:
            if self._stamp() == self._loaded.stamp:
                return
            loaded = self._load()
        except (OSError, InvalidSetting) as exc:
            problem = str(exc) if isinstance(exc, InvalidSetting) else f"tenants_file {self.path}: {exc}"
            if problem != self.problem:
                log.error("tenants file not taken; the last good one stays in force", extra={"detail": problem})
            self.problem = problem
            return
        self._loaded = loaded  # one reference swapped: readers see the old file or the new one whole
        if self.problem is not None:
            log.info("tenants file taken again")
        self.problem = None
        log.info("tenants file read", extra={"tokens": len(loaded.tokens), "tenants": len(self.tenants())})

    def caller(self, token: bytes) -> Caller | None:
        """Who holds `token`; None when it is unknown or expired."""
        entry = self._loaded.tokens.get(digest(token))
        if entry is None or (entry.expires is not None and entry.expires.timestamp() <= self.clock()):
            return None
        return Caller(entry.tenant, entry.role, entry.label)

    def quota(self, tenant: str) -> TenantEntry:
        return self._loaded.quotas.get(tenant) or TenantEntry(tenant)

    def tenants(self) -> list[str]:
        """Every tenant the file names (by a token or a quota), and the default one."""
        return sorted(self._loaded.names)

    def knows(self, tenant: str) -> bool:
        return tenant in self._loaded.names
