"""A bounded load run over loopback against a real server, in two parts.

The mix: many clients at once, each appending to its own session and to one
shared session, searching by keyword and by meaning, and reading its
context, while one client keeps compacting (which also drops vectors and
triggers index rebuilds). Reports throughput, p50/p99 per call, errors by
status, and the server's memory before and after; checks that every
acknowledged Append got ids increasing in the order its client sent them and
that no call failed with anything but RESOURCE_EXHAUSTED (load shedding).

The stall: one session holds BIG_HISTORY recent messages; one client checks
health and another appends to another session, first alone (idle), then
while `searchers` clients search that session by keyword for the one-letter
word `a` (every message matches). Health and Append p99 under the searches
must stay within STALL_LIMIT times their idle p99, measured side by side on
the same server.

    .venv/bin/python -m tests.reliability.loadrun --clients 32 --seconds 60      (make test-load)
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import msgspec
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import Client, MemsvcError
from tests.support import ServerProcess, rss_mib

SHARED = "shared"
BIG_HISTORY = 30_000
"Messages in the one long recent history that keyword searches scan (3.3 MB, under max_history_bytes)."
STALL_LIMIT = 5.0
"Health and Append p99 while the long history is searched, at most this many times their idle p99."
SERVER_FLAGS = ("--max-history-bytes", "200000", "--max-message-bytes", "20000")
TOPICS = ("deploy the sandbox on friday", "the database migration failed", "rotate the api keys",
          "summarize the meeting notes", "我們在沙盒裡測試部署", "明日はサンドボックスでテストします")
KEYWORDS = ("sandbox", "database", "keys", "meeting", "沙盒", "サンドボックス")


class Report(msgspec.Struct):
    clients: int
    seconds: float
    calls: int = 0
    calls_per_second: float = 0.0
    latency_ms: dict[str, dict[str, float]] = {}
    errors: dict[str, int] = {}
    order_violations: int = 0
    rss_mib_start: float = 0.0
    rss_mib_end: float = 0.0


class StallReport(msgspec.Struct):
    history: int
    searchers: int
    seconds: float
    idle_ms: dict[str, dict[str, float]] = {}
    "health and append, alone."
    searching_ms: dict[str, dict[str, float]] = {}
    "health, append and the searches, while `searchers` clients search the long history."
    p99_ratio: dict[str, float] = {}
    "Under the searches over idle, per call: at most STALL_LIMIT."
    errors: dict[str, int] = {}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"n": len(ordered), "p50": round(statistics.median(ordered) * 1e3, 3),
            "p99": round(ordered[int(len(ordered) * 0.99)] * 1e3, 3)}


def _call(client: Client, kind: str, session_id: str, text: str, rng: random.Random) -> Any:
    if kind == "append":
        return client.append(session_id, [("user", text), ("assistant", "noted")])
    if kind == "keyword":
        return client.search(session_id, rng.choice(KEYWORDS), match="keyword")
    if kind == "semantic":
        return client.search(session_id, rng.choice(TOPICS), match="semantic")
    if kind == "context":
        return client.get_context(session_id)
    return client.compact(session_id)


def _client(server: ServerProcess, number: int, stop: threading.Event, samples: dict[str, list[float]],
            errors: collections.Counter, violations: list[int], lock: threading.Lock) -> None:
    rng = random.Random(number)
    own = f"load-{number}"
    last_id = {own: 0, SHARED: 0}
    with server.client(timeout=30) as client:
        while not stop.is_set():
            roll = rng.random()
            session_id = SHARED if rng.random() < 0.3 else own
            text = f"{rng.choice(TOPICS)} c{number} " + "detail " * rng.randint(0, 40)
            kind = ("append" if roll < 0.6 else "keyword" if roll < 0.75 else "semantic" if roll < 0.85
                    else "context" if roll < 0.97 else "compact")
            started = time.perf_counter()
            try:
                reply = _call(client, kind, session_id, text, rng)
            except MemsvcError as error:
                with lock:
                    errors[f"{kind}:{error.code.name}"] += 1
                continue
            elapsed = time.perf_counter() - started
            with lock:
                samples[kind].append(elapsed)
            if kind == "append":
                first = reply.messages[0].id
                if first <= last_id[session_id]:
                    with lock:
                        violations.append(first)
                last_id[session_id] = reply.messages[-1].id


def run(clients: int, seconds: float, data_dir: Path) -> Report:
    server = ServerProcess(data_dir, *SERVER_FLAGS).start()
    assert server.process is not None
    report = Report(clients=clients, seconds=seconds)
    samples: dict[str, list[float]] = collections.defaultdict(list)
    errors: collections.Counter[str] = collections.Counter()
    violations: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with server.client() as warm:
            warm.append(SHARED, [("user", "warm up"), ("assistant", "ok")])
        report.rss_mib_start = rss_mib(server.process.pid)
        threads = [threading.Thread(target=_client, args=(server, n, stop, samples, errors, violations, lock))
                   for n in range(clients)]
        started = time.monotonic()
        _run_for(threads, stop, seconds)
        elapsed = time.monotonic() - started
        report.rss_mib_end = rss_mib(server.process.pid)
    finally:
        server.terminate()
    report.calls = sum(map(len, samples.values()))
    report.calls_per_second = round(report.calls / elapsed, 1)
    report.latency_ms = {kind: percentiles(values) for kind, values in samples.items()}
    report.errors = dict(errors)
    report.order_violations = len(violations)
    return report


def _run_for(threads: list[threading.Thread], stop: threading.Event, seconds: float) -> None:
    """Run `threads` for `seconds`, then set `stop` and wait for them to see it."""
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()


def _timed(kind: str, call: Any, stop: threading.Event, samples: dict[str, list[float]],
           errors: collections.Counter[str]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            call()
        except MemsvcError as error:
            errors[f"{kind}:{error.code.name}"] += 1
            continue
        samples[kind].append(time.perf_counter() - started)


def _phase(server: ServerProcess, seconds: float, searchers: int, errors: collections.Counter[str]
           ) -> dict[str, dict[str, float]]:
    """Health checks and Appends to a small session for `seconds`, with `searchers` clients searching."""
    samples: dict[str, list[float]] = collections.defaultdict(list)
    stop = threading.Event()
    with grpc.insecure_channel(server.tcp) as channel, server.client(timeout=30) as client:
        health = health_pb2_grpc.HealthStub(channel)
        calls = [("health", lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=30)),
                 ("append", lambda: client.append("small", [("user", "meanwhile"), ("assistant", "ok")]))]
        calls += [("search", lambda: client.search("big", "a", match="keyword", limit=32))] * searchers
        _run_for([threading.Thread(target=_timed, args=(kind, call, stop, samples, errors)) for kind, call in calls],
                 stop, seconds)
    return {kind: percentiles(values) for kind, values in samples.items()}


def stall_run(history: int, searchers: int, seconds: float, data_dir: Path) -> StallReport:
    """Idle, then searching: `seconds` each, on one server with the default limits."""
    report = StallReport(history=history, searchers=searchers, seconds=seconds)
    errors: collections.Counter[str] = collections.Counter()
    server = ServerProcess(data_dir).start()
    try:
        with server.client(timeout=120) as client:
            for start in range(0, history, 1000):
                client.append("big", [("user", f"message {n}: a note about the plan")
                                      for n in range(start, min(start + 1000, history))])
            client.search("big", "a", match="keyword")  # the session is open and indexed before timing
        report.idle_ms = _phase(server, seconds, 0, errors)
        report.searching_ms = _phase(server, seconds, searchers, errors)
    finally:
        server.terminate()
    report.p99_ratio = {kind: round(report.searching_ms[kind]["p99"] / report.idle_ms[kind]["p99"], 2)
                        for kind in ("health", "append")}
    report.errors = dict(errors)
    return report


def stalled(report: StallReport) -> bool:
    return any(ratio > STALL_LIMIT for ratio in report.p99_ratio.values())


def unexpected_errors(report: Report) -> dict[str, int]:
    """Errors other than load shedding."""
    shed = grpc.StatusCode.RESOURCE_EXHAUSTED.name
    return {key: count for key, count in report.errors.items() if not key.endswith(shed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--history", type=int, default=BIG_HISTORY, help="messages in the searched history")
    parser.add_argument("--searchers", type=int, default=4)
    parser.add_argument("--stall-seconds", type=float, default=15, help="of each stall phase, idle and searching")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.clients, args.seconds, Path(tmp) / "mix")
        stall = stall_run(args.history, args.searchers, args.stall_seconds, Path(tmp) / "stall")
    print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    print(msgspec.json.format(msgspec.json.encode(stall), indent=2).decode())
    raise SystemExit(1 if unexpected_errors(report) or report.order_violations or stalled(stall) or stall.errors
                     else 0)


if __name__ == "__main__":
    main()
