"""`memsvc tenants`: tokens and tenants in the tenants file, and removing a tenant whole.

Owns the commands: `add-token` makes a random token, prints it once and
appends only its SHA-256 (with its tenant and role) to the file, which a
running server reads again within a second; `list` shows the file's entries
(labels, roles, expiries: never a token); `remove` takes a tenant's entries
out of the file, then, with the server stopped (its data directory's lock),
deletes the tenant's data: its sessions, archive, vectors, and its lessons
(its SQLite file, or its rows in a shared PostgreSQL database). Must never
write a token anywhere but to standard output, once.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from memsvc.core import config, durable
from memsvc.core.errors import InvalidSetting
from memsvc.core.layout import Layout
from memsvc.tenancy.tenants import ANY, DEFAULT, RANKS, digest, is_tenant_name, parse

TOKEN_BYTES = 32


def add_command(commands: Any) -> None:
    parser = commands.add_parser("tenants", help="add tokens to the tenants file, list it, remove a tenant",
                                 description="Manage the tenants file (the server's tenants_file): tokens with a "
                                             "tenant and a role, tenants' quotas. A running server reads it again "
                                             "within a second of a change.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    adding = actions.add_parser("add-token", help="make a token, print it once, store only its SHA-256")
    adding.add_argument("tenant", metavar="TENANT", help="the tenant's name, or '*' for an admin of every tenant")
    adding.add_argument("role", metavar="ROLE", choices=sorted(RANKS), help="read, write or admin")
    adding.add_argument("--label", default="", help="a name for the token, shown in logs and the audit log")
    adding.add_argument("--expires", default="", help="when the token stops working (RFC 3339, e.g. "
                                                      "2027-01-01T00:00:00Z)")
    listing = actions.add_parser("list", help="the file's tokens (labels, tenants, roles, expiries) and quotas")
    removing = actions.add_parser("remove", help="a tenant's tokens out of the file and, with the server stopped, "
                                                 "its data out of the data directory")
    removing.add_argument("tenant", metavar="TENANT")
    for each in (adding, listing):
        each.add_argument("--tenants-file", type=Path, required=True, help="the tenants file (tenants_file)")
    config.add_arguments(removing)  # the server's settings: tenants_file, data_dir, lessons_backend...
    parser.set_defaults(main=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "add-token":
            return _add_token(args)
        if args.action == "list":
            return _list(args.tenants_file)
        return _remove(args)
    except InvalidSetting as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _add_token(args: argparse.Namespace) -> int:
    if args.tenant != ANY and not is_tenant_name(args.tenant):
        raise InvalidSetting(f"{args.tenant!r} is not a tenant name: 1-63 of a-z 0-9 _ . -, starting with a letter "
                             "or digit (or '*')")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    entry = (f'\n[[tokens]]\nsha256 = "{digest(token.encode())}"\ntenant = "{args.tenant}"\nrole = "{args.role}"\n'
             + (f"label = {_toml_string(args.label)}\n" if args.label else "")
             + (f"expires = {datetime.fromisoformat(args.expires).isoformat()}\n" if args.expires else ""))
    before = _read(args.tenants_file)
    after = before + entry.encode()
    parse(after, str(args.tenants_file))  # the file stays one the server takes
    durable.atomic_write(args.tenants_file, after)
    print(token)
    return 0


def _list(path: Path) -> int:
    parsed = parse(_read(path), str(path))
    for token in parsed.tokens:
        expires = f" expires {token.expires.isoformat()}" if token.expires else ""
        print(f"token {token.sha256[:12]}  tenant {token.tenant}  role {token.role}  {token.label}{expires}")
    for tenant in parsed.tenants:
        print(f"tenant {tenant.name}  max_sessions {tenant.max_sessions or '-'}  max_bytes {tenant.max_bytes or '-'}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    name = args.tenant
    if name in (DEFAULT, ANY) or not is_tenant_name(name):
        raise InvalidSetting(f"{name!r} cannot be removed: name a tenant of the file (not 'default' nor '*')")
    not_settings = ("tenant", "main", "command", "action")
    settings = config.load({field: value for field, value in vars(args).items() if field not in not_settings})
    if not settings.tenants_file:
        raise InvalidSetting("give the server's tenants_file (--tenants-file, MEMSVC_TENANTS_FILE or --config)")
    path = Path(settings.tenants_file)
    data = _read(path)
    kept = {"tokens": [token for token in tomllib.loads(data.decode()).get("tokens", []) if token["tenant"] != name],
            "tenants": [tenant for tenant in tomllib.loads(data.decode()).get("tenants", []) if tenant["name"] != name]}
    text = "".join(f"[[tokens]]\n{_toml_table(token)}\n" for token in kept["tokens"])
    text += "".join(f"[[tenants]]\n{_toml_table(tenant)}\n" for tenant in kept["tenants"])
    parse(text.encode(), str(path))
    durable.atomic_write(path, text.encode())
    print(f"removed tenant {name}'s tokens from {path}")
    lock = durable.DirectoryLock(Path(settings.data_dir))
    lock.acquire()  # a running server refuses: its tokens are gone already; stop it and run this again
    try:
        directory = Layout(settings.data_dir).tenant(name)
        removed = directory.sessions_dir.parent
        if settings.lessons_backend == "postgres":
            from memsvc.app import lesson_database_from_settings

            database = lesson_database_from_settings(settings)
            assert database is not None
            with database.connection("removing a tenant's lessons") as conn:
                conn.execute("DELETE FROM memsvc_lessons WHERE tenant = %s", (name,))
            database.close()
        durable.remove_tree(removed)
    finally:
        lock.release()
    print(f"removed tenant {name}'s data from {settings.data_dir}")
    return 0


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_table(entry: dict[str, object]) -> str:
    lines = []
    for key, value in entry.items():
        if isinstance(value, str):
            lines.append(f"{key} = {_toml_string(value)}")
        elif isinstance(value, datetime):
            lines.append(f"{key} = {value.isoformat()}")
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"
