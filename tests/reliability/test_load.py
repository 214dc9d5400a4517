"""A short bounded load run (make test-load runs the long one), and search under load."""

import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.reliability import loadrun

pytestmark = pytest.mark.in_process

MAX_SEARCHES = 30


def test_short_load_run_keeps_order_and_fails_nothing(tmp_path):
    report = loadrun.run(clients=16, seconds=5, data_dir=tmp_path / "data")
    assert report.calls > 0 and {"append", "keyword", "semantic", "context"} <= set(report.latency_ms)
    assert loadrun.unexpected_errors(report) == {}
    assert report.order_violations == 0


def test_short_stall_run_measures_idle_and_searching_side_by_side(tmp_path):
    """make test-load runs it over 30,000 messages and fails past STALL_LIMIT; here only its shape."""
    report = loadrun.stall_run(history=3000, searchers=2, seconds=2, data_dir=tmp_path / "data")
    assert set(report.idle_ms) == {"health", "append"} and report.searching_ms["search"]["n"] > 0
    assert set(report.p99_ratio) == {"health", "append"} and report.errors == {}


def test_keyword_searches_over_a_long_history_hold_up_no_other_call(make_server):
    """Search computes off the event loop: while it scores 30,000 recent messages, health checks and
    appends to other sessions are answered before it is (with the search on the loop, each call sent
    during a search waited it out, so none could both start and finish inside one). Counted by spans,
    not by how many calls fit in a given time, which depends on the machine."""
    server = make_server()
    with server.client(timeout=120) as client:
        for start in range(0, loadrun.BIG_HISTORY, 1000):
            client.append("big", [("user", f"message {n}: a note about the plan") for n in range(start, start + 1000)])
        searches: list[tuple[float, float]] = []
        enough = threading.Event()

        def search() -> None:
            with server.client(timeout=120) as searcher:
                while not enough.is_set() and len(searches) < MAX_SEARCHES:
                    began = time.monotonic()
                    assert len(searcher.search("big", "a", match="keyword", limit=32).hits) == 32
                    searches.append((began, time.monotonic()))

        calls: list[tuple[str, float, float]] = []
        searching = threading.Thread(target=search)
        with grpc.insecure_channel(server.tcp) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            searching.start()
            while searching.is_alive():
                kind = "append" if len(calls) % 5 == 4 else "health"
                began = time.monotonic()
                if kind == "append":
                    client.append("other", [("user", "meanwhile")])
                else:
                    reply = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                    assert reply.status == health_pb2.HealthCheckResponse.SERVING
                calls.append((kind, began, time.monotonic()))
                inside = _answered_inside(calls, list(searches))
                if inside["health"] >= 5 and inside["append"] >= 1:
                    enough.set()
        searching.join()
    inside = _answered_inside(calls, searches)
    assert inside["health"] >= 5 and inside["append"] >= 1, (inside, len(searches))


def _answered_inside(calls: list[tuple[str, float, float]], searches: list[tuple[float, float]]) -> dict[str, int]:
    """How many calls of each kind both started and finished while one search was running."""
    inside = {"health": 0, "append": 0}
    for kind, began, ended in calls:
        if any(began > started and ended < finished for started, finished in searches):
            inside[kind] += 1
    return inside
