"""The `memsvc` command line: `memsvc serve` and friends.

Owns argument parsing and exit codes. Must never hold domain logic.
"""

from __future__ import annotations

import argparse
import sys

from . import config, logs
from .errors import InvalidSetting


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memsvc", description="Conversation memory for LLM agents, over gRPC.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="run the server",
        description="Run the server. Settings: flags > MEMSVC_* environment > TOML file (--config) > defaults.")
    config.add_arguments(serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    command = args.pop("command")
    try:
        settings = config.load(args)
    except InvalidSetting as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    if command == "serve":
        from .server import serve

        return serve(settings)
    return 2
