"""The `memsvc` command line: `memsvc serve` and friends.

Owns argument parsing and exit codes. Must never hold domain logic.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memsvc.core import config
from memsvc.core.errors import InvalidSetting
from memsvc.runtime import logs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsvc", description="Conversation memory for LLM agents, over gRPC.")
    commands = parser.add_subparsers(dest="command", required=True)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    command = args.pop("command")
    source = args.pop("source", None)
    try:
        settings = config.load(args)
    except InvalidSetting as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    if command == "serve":
        from memsvc.rpc.server import serve

        return serve(settings)
    return import_directory(Path(source), settings)


def import_directory(source: Path, settings: config.Settings) -> int:
    from tqdm import tqdm

    from memsvc.archive.index import Archive
    from memsvc.core.durable import DirectoryLock
    from memsvc.window.importer import import_directory as run_import

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
        archive = Archive(settings.store_dir, settings.archive_commit_seconds)
        if archive.damage.problem is not None:
            print(f"memsvc: cannot import into an unusable archive: {archive.damage.problem}; "
                  f"{archive.damage.remedy}", file=sys.stderr)
            return 2
        try:
            report = run_import(source, settings.sessions_dir, archive,
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
