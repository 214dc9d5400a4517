"""Error memory on PostgreSQL against SQLite, through the server: LookupErrors
(and a repeated RecordError, which refreshes a lesson) on two servers side by
side, one per backend, with the same lessons, against the no-op floor (a
health Check) of each, in one interleaved run.

PostgreSQL is Debian's, started for the run in a temp directory with fsync
on (a committed refresh is on disk, as SQLite's synchronous=FULL is), on
loopback TCP with a password, as a pod would reach it. Then, in this process,
the two halves of a lookup on each backend's store alone: reading a tool's
lessons, and the durable refresh of its hits.

    .venv/bin/python benchmarks/lessons.py [--rounds 2000] [--lessons-per-tool 40]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import grpc
from common import ServerProcess, interleaved, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.lessons.model import NewLesson
from memsvc.lessons.service import Lessons
from memsvc_client import Client
from tests.support.lessons import PostgresBackend, SqliteBackend
from tests.support.postgres import PostgresServer

TOOLS = ("web_fetch", "shell", "db", "git", "browser", "search", "calendar", "email")
FAILURES = ("HTTP 403 Forbidden from the origin", "connection timed out after 30s", "permission denied writing",
            "missing required parameter", "rate limit exceeded: 429 Too Many Requests", "no results found for",
            "certificate verify failed", "invalid value for parameter")


def prefill(client: Client, per_tool: int) -> None:
    for tool in TOOLS:
        for number in range(per_tool):
            failure = FAILURES[number % len(FAILURES)]
            client.record_error(tool, f"{failure} (case {number} of {tool})", f"fix number {number}",
                                cause=f"cause {number}", keywords=[f"k{number % 5}"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--lessons-per-tool", type=int, default=40)
    args = parser.parse_args()
    postgres = PostgresServer(fsync=True).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            backend = PostgresBackend(postgres, postgres.create_database())
            servers = {"sqlite": ServerProcess(Path(tmp) / "sqlite").start(),
                       "postgres": ServerProcess(Path(tmp) / "postgres", *backend.server_args).start()}
            try:
                results = run(servers, args.rounds, args.lessons_per_tool)
            finally:
                for server in servers.values():
                    server.terminate()
            stores = {"sqlite": SqliteBackend(Path(tmp) / "alone"),
                      "postgres": PostgresBackend(postgres, postgres.create_database())}
            results |= halves(stores, args.rounds, args.lessons_per_tool)
    finally:
        postgres.close()
    report(results, args)


def run(servers: dict[str, ServerProcess], rounds: int, per_tool: int) -> dict[str, dict]:
    clients = {name: Client(server.tcp) for name, server in servers.items()}
    channels = {name: grpc.insecure_channel(server.tcp) for name, server in servers.items()}
    try:
        for client in clients.values():
            prefill(client, per_tool)
        check = health_pb2.HealthCheckRequest()
        calls = {}
        for name, client in clients.items():
            health = health_pb2_grpc.HealthStub(channels[name])
            calls[f"health_check_{name}"] = lambda health=health: health.Check(check)
            calls[f"lookup_{name}"] = lambda client=client: client.lookup_errors(
                "shell", "bash: /etc/hosts: permission denied writing the file")
            calls[f"record_repeat_{name}"] = lambda client=client: client.record_error(
                "db", "connection timed out after 30s (case 1 of db)", "fix number 1")
        return interleaved(calls, rounds=rounds)
    finally:
        for client in clients.values():
            client.close()
        for channel in channels.values():
            channel.close()


def halves(backends: dict[str, SqliteBackend | PostgresBackend], rounds: int, per_tool: int) -> dict[str, dict]:
    """A lookup's read of one tool's lessons, and its refresh of three hits, on each store alone."""
    opened = {name: Lessons(backend.store(time.time_ns), ttl_days=90, clock=time.time_ns)
              for name, backend in backends.items()}
    try:
        calls = {}
        for name, lessons in opened.items():
            for tool in TOOLS:
                for number in range(per_tool):
                    lessons.record(NewLesson(tool_name=tool, symptom=f"{FAILURES[number % len(FAILURES)]} {number}",
                                             outcome="resolved", action="fix"))
            store = lessons.store
            hits = [row.lesson.id for row in store.of_tool("shell", time.time_ns())[:3]]
            calls[f"store_read_{name}"] = lambda store=store: store.of_tool("shell", time.time_ns())
            calls[f"store_refresh_{name}"] = lambda store=store, hits=hits: store.refresh(
                hits, time.time_ns(), time.time_ns() + 10**15)
        return interleaved(calls, rounds=rounds)
    finally:
        for lessons in opened.values():
            lessons.close()


def report(results: dict[str, dict], args: argparse.Namespace) -> None:
    def ratio(a: str, b: str, field: str) -> float:
        return round(results[a][field] / results[b][field], 2)

    summary = {
        "lessons": len(TOOLS) * args.lessons_per_tool,
        "latency": results,
        "postgres_over_sqlite": {call: {field: ratio(f"{call}_postgres", f"{call}_sqlite", field)
                                        for field in ("p50_ms", "p99_ms")}
                                 for call in ("lookup", "record_repeat", "store_read", "store_refresh")},
        "over_own_floor_p50": {name: ratio(name, f"health_check_{name.rsplit('_', 1)[1]}", "p50_ms")
                               for name in results if not name.startswith(("health", "store"))},
    }
    for name, r in results.items():
        print(f"{name:24s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms")
    for call, ratios in summary["postgres_over_sqlite"].items():
        print(f"{call}: postgres / sqlite  p50 x{ratios['p50_ms']}  p99 x{ratios['p99_ms']}")
    for name, value in summary["over_own_floor_p50"].items():
        print(f"{name}: x{value} its server's health-check floor (p50)")
    save("lessons", summary)


if __name__ == "__main__":
    main()
