"""`memsvc export`, `memsvc import-session` and `memsvc server-info`: a session to a file and back, and
which server answers, against a running server (or a proxy in front of shards).

They talk to the server, never to a data directory: the server holds the data-directory lock, the
archive's one writer and the open sessions, so a copy taken beside it could miss what it has not
written yet, and an export must work while the session is in use. To export from a stopped data
directory, start a server on it (`memsvc serve --data-dir DIR --listen unix:///tmp/x.sock`).

The file is JSON Lines, each line one ExportSessionResponse in proto3 JSON: the head, then one line
per message in id order, then the end (count, last id, SHA-256), which the importing server checks.
Owns the file's layout and regrouping its lines into parts; must never change what they hold.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from google.protobuf import json_format

from memsvc.cli.connection import add_connection_arguments
from memsvc.cli.render import as_json, when
from memsvc_client.convert import to_proto
from memsvc_client.rpcs import RPCS

LINE_PARTS = 500
"Messages per part sent to the server when a file is imported (each line holds one)."


def export_session(memory: Any, args: argparse.Namespace) -> None:
    if args.output == "-":
        _export(memory, args, sys.stdout)
        return
    partial = Path(f"{args.output}.partial")
    with partial.open("w", encoding="utf-8") as output:
        end = _export(memory, args, output)
    partial.replace(args.output)  # the file appears once whole
    print(f"exported session {args.session}: {end.messages} messages to {args.output} (sha256 {end.sha256})",
          file=sys.stderr)


def _export(memory: Any, args: argparse.Namespace, output: IO[str]) -> Any:
    response, end = RPCS["ExportSession"].response, None
    for part in memory.export_session(args.session, timeout=args.stream_timeout):
        if part.messages:
            for message in part.messages:
                output.write(_line(response, {"messages": [message]}))
        else:
            output.write(_line(response, part))
            end = part.end or end
    return end


def _line(message_class: Any, fields: object) -> str:
    return json_format.MessageToJson(to_proto(message_class, fields), indent=None, ensure_ascii=False) + "\n"


def import_session(memory: Any, args: argparse.Namespace) -> None:
    with (sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")) as source:
        reply = memory.import_session(_parts(source), timeout=args.stream_timeout)
    if args.json:
        return as_json(reply)
    held = " (held: it is served once released)" if reply.held else ""
    print(f"imported session {reply.session_id}: {reply.messages} messages (sha256 {reply.sha256}){held}")


def _parts(lines: Iterable[str]) -> Iterator[Any]:
    """The file's lines as ImportSession requests, consecutive message lines joined into parts."""
    request_class: Any = RPCS["ImportSession"].request
    batch = request_class()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            part = json_format.Parse(line, request_class())
        except json_format.ParseError as error:
            raise SystemExit(f"memsvc: line {number} is not part of an export: {error}") from None
        if part.messages and not part.HasField("head") and not part.HasField("end"):
            batch.messages.extend(part.messages)
            if len(batch.messages) >= LINE_PARTS:
                yield batch
                batch = request_class()
            continue
        if batch.messages:
            yield batch
            batch = request_class()
        yield part
    if batch.messages:
        yield batch


def server_info(memory: Any, args: argparse.Namespace) -> None:
    info = memory.get_server_info(args.session or "")
    if args.json:
        return as_json(info)
    print(f"shard:       {info.shard_name or '(unnamed)'}")
    print(f"version:     memsvc {info.version}, contract {info.contract_version}")
    print(f"data dir id: {info.data_dir_id}")
    print(f"started:     {when(info.started_at_unix_nano)}")
    print(f"held:        {info.held_sessions} sessions")
    if info.session_creation_paused_until_unix_nano:
        print(f"paused:      creating sessions, until {when(info.session_creation_paused_until_unix_nano)}")
    if args.session:
        state = "held (moving)" if info.session_held else "stored" if info.session_stored else "not stored"
        print(f"session {args.session}: {state} here")


def add_commands(commands: Any) -> None:
    def command(name: str, run: Any, summary: str, description: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(name, help=summary, description=description)
        add_connection_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.set_defaults(run=run)
        return parser

    exporting = command(
        "export", export_session, "write one session whole to a file (JSON Lines)",
        "Export one session whole: every message with its id, time and idempotency key (archived ones "
        "included), the rolling summary and its cursor, the compaction cutoff. The file is JSON Lines, one "
        "ExportSessionResponse per line; `memsvc import-session` reads it back. Through a proxy, the session's "
        "shard answers.")
    exporting.add_argument("session", metavar="SESSION", help="the session id")
    exporting.add_argument("-o", "--output", default="-", help="the file to write (default: standard output)")
    importing = command(
        "import-session", import_session, "store a session from a file `memsvc export` wrote",
        "Import a session from an export file, whole or not at all: nothing is stored unless every line "
        "arrives and the end's count and SHA-256 match. A session that already exists is refused "
        "(ALREADY_EXISTS). Through a proxy, the session's shard stores it.")
    importing.add_argument("input", metavar="FILE", help="the export file (- for standard input)")
    for parser in (exporting, importing):
        parser.add_argument("--stream-timeout", type=float, default=None,
                            help="seconds the whole transfer may take (default: no limit)")
    info = command("server-info", server_info, "show which server answers: shard, version, data directory",
                   "Show the server that answers: its shard name, version and data directory id. With --session "
                   "the call is routed like that session's (through a proxy: to its shard) and says whether the "
                   "server stores or holds it.")
    info.add_argument("--session", default="", help="route by this session and report on it")
