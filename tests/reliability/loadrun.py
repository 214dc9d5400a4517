"""A bounded load run over loopback against a real server.

Many clients at once: each appends to its own session and to one shared
session, searches by keyword and by meaning, and reads its context, while one
client keeps compacting (which also drops vectors and triggers index
rebuilds). Reports throughput, p50/p99 per call, errors by status, and the
server's memory before and after; checks that every acknowledged Append got
ids increasing in the order its client sent them and that no call failed
with anything but RESOURCE_EXHAUSTED (load shedding).

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

from memsvc_client import Client, MemsvcError
from tests.support import ServerProcess

SHARED = "shared"
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


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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
        for thread in threads:
            thread.start()
        stop.wait(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        report.rss_mib_end = rss_mib(server.process.pid)
    finally:
        server.terminate()
    report.calls = sum(map(len, samples.values()))
    report.calls_per_second = round(report.calls / elapsed, 1)
    for kind, values in samples.items():
        ordered = sorted(values)
        report.latency_ms[kind] = {"n": len(ordered), "p50": round(statistics.median(ordered) * 1e3, 3),
                                   "p99": round(ordered[int(len(ordered) * 0.99)] * 1e3, 3)}
    report.errors = dict(errors)
    report.order_violations = len(violations)
    return report


def unexpected_errors(report: Report) -> dict[str, int]:
    """Errors other than load shedding."""
    shed = grpc.StatusCode.RESOURCE_EXHAUSTED.name
    return {key: count for key, count in report.errors.items() if not key.endswith(shed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.clients, args.seconds, Path(tmp) / "data")
    print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    raise SystemExit(1 if unexpected_errors(report) or report.order_violations else 0)


if __name__ == "__main__":
    main()
