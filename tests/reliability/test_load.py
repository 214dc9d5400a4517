"""A short bounded load run (make test-load runs the long one)."""

from tests.reliability import loadrun


def test_short_load_run_keeps_order_and_fails_nothing(tmp_path):
    report = loadrun.run(clients=16, seconds=5, data_dir=tmp_path / "data")
    assert report.calls > 0 and {"append", "keyword", "semantic", "context"} <= set(report.latency_ms)
    assert loadrun.unexpected_errors(report) == {}
    assert report.order_violations == 0
