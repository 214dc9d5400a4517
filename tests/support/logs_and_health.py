"""What a test reads of any server, in a process or in the test's own: its JSON log lines, its health
and a client. Both server kinds (tests.support.ServerProcess, tests.support.inprocess.InProcessServer)
are `Readable`, so the two read the same way."""

from __future__ import annotations

import json
from collections.abc import Iterable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import Client


def log_entry(line: str) -> dict:
    """One log line as JSON; {} for a line that is not (a traceback a server should not print)."""
    try:
        return json.loads(line)
    except ValueError:
        return {}


def logged(lines: Iterable[str], event: str) -> list[dict]:
    """The JSON log lines of `event` among `lines`."""
    return [entry for line in list(lines) if (entry := log_entry(line)).get("event") == event]


def health_status(target: str, service: str = "") -> int:
    """The health status a server reports for `service` at `target`."""
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    return reply.status


class Readable:
    """A server's log lines and main TCP address, and what a test reads through them."""

    log_lines: list[str]
    tcp: str

    def logged(self, event: str) -> list[dict]:
        """The JSON log lines of `event` so far."""
        return logged(self.log_lines, event)

    def health_status(self, service: str = "", target: str | None = None) -> int:
        """The health status the server reports for `service` (on the main TCP port unless told)."""
        return health_status(target or self.tcp, service)

    def client(self, target: str | None = None, **kwargs: object) -> Client:
        return Client(target or self.tcp, **kwargs)  # type: ignore[arg-type]
