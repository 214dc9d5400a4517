"""The `memsvc` command line: `memsvc serve`, `import`, `mcp` and the operator commands.

Owns argument parsing and exit codes. Must never hold domain logic: `serve` and `import` run
the server's code, everything else talks to running servers through the client (`remote`,
`transfer`, `reshard`).
"""

from __future__ import annotations

# First: it picks grpc's I/O layer, which only works before grpc is imported.
from memsvc.cli import grpc_stack  # noqa: F401

# isort: split
import argparse
import sys
from pathlib import Path

from memsvc.cli import connection, evaluate, remote, reshard, tenants, transfer
from memsvc.core import config
from memsvc.core.errors import InvalidSetting
from memsvc.runtime import logs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memsvc", description="Conversation memory for LLM agents, over gRPC. `memsvc COMMAND --help` "
                                   "documents each command; all but serve and import talk to a running server.")
    connection.add_before_command(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the server",
        description="Run the server. Settings: flags > MEMSVC_* environment > TOML file (--config) > defaults.")
    config.add_arguments(serve)
    adopt = commands.add_parser(
        "import", help="adopt the reference agent's data directory",
        description="Copy DIR/sessions/*/history.json (with summary.json and .summary_cursor) into the data "
                    "directory, reading legacy time headers, and index every message into the archive. "
                    "Run it with the server stopped; sessions already present are skipped.")
    adopt.add_argument("source", metavar="DIR", help="the reference data directory (or its sessions/ directory)")
    config.add_arguments(adopt)
    agents = commands.add_parser(
        "mcp", help="serve memsvc's tools to MCP agents (stdio, or streamable HTTP)",
        description="A Model Context Protocol server exposing memsvc to agents: search the chat history, read "
                    "the context and the rolling summary, look up and record error lessons. It talks to a "
                    "running memsvc (--target). Over stdio by default; --http serves streamable HTTP instead.")
    connection.add_connection_arguments(agents)
    scope = agents.add_argument_group("sessions the tools may touch (at least one of these)")
    scope.add_argument("--session", default="",
                       help="the agent's own session: the tools' default when a call names none")
    scope.add_argument("--allow-session", action="append", default=[], metavar="ID",
                       help="another session the tools may touch (repeatable)")
    scope.add_argument("--allow-session-prefix", action="append", default=[], metavar="PREFIX",
                       help="sessions whose id starts with PREFIX may be touched (repeatable; '' allows every "
                            "session)")
    agents.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on this address instead of stdio")
    agents.add_argument("--path", default="/mcp", help="the streamable HTTP endpoint's path (default /mcp)")
    agents.add_argument("--http-token-file", type=Path,
                        help="file holding the bearer token MCP clients must present over --http (without it "
                             "they present memsvc's, from --token-file; with neither, only a loopback address "
                             "is served)")
    agents.add_argument("--pass-token", action="store_true",
                        help="over --http, pass on to memsvc the bearer token each MCP client presents, so its calls "
                             "act with that client's tenant and role (a tenants_file's tokens; an admin of every "
                             "tenant names the one it acts for in its requests' memsvc-tenant header)")
    bounds = agents.add_argument_group("bounds of --http")
    bounds.add_argument("--max-connections", type=int, help="connections open at once (default 64; fewer if the "
                                                            "descriptor limit leaves less room)")
    bounds.add_argument("--header-timeout-seconds", type=float,
                        help="time a connection has for a request's headers, from its start or the request's first "
                             "byte (default 10)")
    bounds.add_argument("--body-timeout-seconds", type=float,
                        help="time a request has for its body once its headers are in (default 60)")
    bounds.add_argument("--connection-idle-seconds", type=float,
                        help="time a kept-alive connection may wait between requests (default 60)")
    remote.add_commands(commands)
    transfer.add_commands(commands)
    reshard.add_command(commands)
    tenants.add_command(commands)
    evaluate.add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parsed = build_parser().parse_args(argv)
    try:
        connection.resolve(parsed)
    except ValueError as error:
        print(f"memsvc: {error}", file=sys.stderr)
        return 2
    if parsed.command == "mcp":
        from memsvc.mcp.access import Scope
        from memsvc.mcp.server import serve as serve_mcp

        try:
            options = connection.client_arguments(parsed)
            http_token = parsed.http_token_file.read_text().strip() if parsed.http_token_file else None
            if parsed.http_token_file and not http_token:
                raise ValueError(f"{parsed.http_token_file} is empty: it must hold the token MCP clients present")
            scope = Scope.configured(parsed.session, parsed.allow_session, parsed.allow_session_prefix)
            bounds = {name: value for name in ("max_connections", "header_timeout_seconds", "body_timeout_seconds",
                                               "connection_idle_seconds")
                      if (value := getattr(parsed, name)) is not None}
            return serve_mcp(parsed.target, options, scope, parsed.http, parsed.path, http_token, bounds,
                             parsed.pass_token)
        except (OSError, ValueError) as error:  # a token or TLS file, the scope, an address that cannot be served
            print(f"memsvc mcp: {error}", file=sys.stderr)
            return 2
    if getattr(parsed, "main", None) is not None:  # a command that connects to servers of its own choosing
        return int(parsed.main(parsed))
    if getattr(parsed, "run", None) is not None:
        return remote.run(parsed)
    args = vars(parsed)
    command = args.pop("command")
    source = args.pop("source", None)
    try:
        settings = config.load(args)
    except InvalidSetting as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    if command == "serve":
        return serve(settings)
    return import_directory(Path(source), settings)


def serve(settings: config.Settings) -> int:
    """The gRPC server, with the HTTP listener of `http_listen` when it is set."""
    from memsvc.rpc import server

    transports = []
    if settings.http_listen:
        from memsvc.http.listener import HttpListener

        try:
            transports.append(HttpListener(settings))
        except InvalidSetting as exc:
            print(f"memsvc: {exc}", file=sys.stderr)
            return 2
    return server.serve(settings, transports)


def import_directory(source: Path, settings: config.Settings) -> int:
    from tqdm import tqdm

    from memsvc.archive.index import Archive
    from memsvc.core.durable import DirectoryLock
    from memsvc.core.layout import Layout
    from memsvc.transfer.adoption import adopt_directory

    if not source.is_dir():
        print(f"memsvc: {source} is not a directory", file=sys.stderr)
        return 2
    lock = DirectoryLock(Path(settings.data_dir))
    try:
        lock.acquire()
    except InvalidSetting as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    try:
        places = Layout(settings.data_dir).tenant()
        archive = Archive(places.store_dir, settings.archive_commit_seconds)
        if archive.damage.problem is not None:
            print(f"memsvc: cannot import into an unusable archive: {archive.damage.problem}; "
                  f"{archive.damage.remedy}", file=sys.stderr)
            return 2
        try:
            report = adopt_directory(source, places, archive,
                                     progress=lambda items: tqdm(items, unit="session", file=sys.stderr))
        finally:
            archive.close()
    finally:
        lock.release()
    print(f"imported {len(report.imported)} sessions ({report.messages} messages) into {settings.data_dir}")
    for name, reason in sorted(report.skipped.items()):
        print(f"skipped {name}: {reason}")
    for name in report.damaged:
        print(f"warning: {name}: unreadable lines in the source history were not imported")
    return 0
