"""A short bounded load run (make test-load runs the long one), and search under load."""

import threading

import pytest
from grpc_health.v1 import health_pb2

from tests.reliability import loadrun

pytestmark = pytest.mark.in_process


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
    appends to other sessions keep being answered (with the search on the loop, each waited it out)."""
    server = make_server()
    with server.client(timeout=120) as client:
        for start in range(0, loadrun.BIG_HISTORY, 1000):
            client.append("big", [("user", f"message {n}: a note about the plan") for n in range(start, start + 1000)])
        finished = threading.Event()

        def search() -> None:
            with server.client(timeout=120) as searcher:
                for _ in range(3):
                    assert len(searcher.search("big", "a", match="keyword", limit=32).hits) == 32
            finished.set()

        searching = threading.Thread(target=search)
        searching.start()
        answered = appended = 0
        while not finished.is_set():
            assert server.health_status() == health_pb2.HealthCheckResponse.SERVING
            answered += 1
            if answered % 10 == 0:
                client.append("other", [("user", "meanwhile")])
                appended += 1
        searching.join()
    assert answered >= 30 and appended >= 3, (answered, appended)
