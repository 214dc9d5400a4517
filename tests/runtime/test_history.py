"""The metrics history's rings: rates and percentiles per step, one ring per series, and its memory bound held
whatever the traffic (tenants, kinds, samples)."""

import tracemalloc

from memsvc.runtime import metrics
from memsvc.runtime.history import ALL, BOUND_BYTES, MAX_KEYS, MAX_TENANTS, OTHER, SERIES, SLOTS, STEP_SECONDS, History


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_step_holds_each_kinds_rate_and_percentiles_per_tenant_and_for_all():
    clock = Clock()
    history = History(clock)
    for _ in range(97):
        history.record("append", "a", 0.0008)  # bucket (0.5 ms, 1 ms]
    for _ in range(3):
        history.record("append", "a", 4.0)  # bucket (2.5 s, 5 s]: the slowest 3 of 100
    history.record("search_hybrid", "b", 0.02)
    history.record("lookup_errors", "b", 0.001, hits=3)
    clock.now += STEP_SECONDS
    history.sample({"a": {"sessions": 2, "bytes_window": 100}, "b": {"sessions": 5, "embedding_backlog": 7}})

    a, b, every = history.plot("a"), history.plot("b"), history.plot(ALL)
    assert a.times == [clock.now]
    assert a.series["append_per_second"] == [10.0]
    assert 0.5 < a.series["append_p50_ms"][0] <= 1.0
    assert 2500 < a.series["append_p99_ms"][0] <= 5000
    assert a.series["search_hybrid_per_second"] == [0.0] and a.series["search_hybrid_p50_ms"] == [None]
    assert b.series["search_hybrid_per_second"] == [0.1] and b.series["error_memory_hits"] == [3.0]
    assert every.series["sessions"] == [7.0] and every.series["bytes_window"] == [100.0]
    assert every.series["embedding_backlog"] == [7.0] and every.series["append_per_second"] == [10.0]


def test_the_ring_keeps_the_last_hour_oldest_first():
    clock = Clock()
    history = History(clock)
    for step in range(SLOTS + 50):
        history.record("append", "a", 0.001)
        clock.now += STEP_SECONDS
        history.sample({"a": {"sessions": step}})
    plot = history.plot("a")
    assert len(plot.times) == SLOTS
    assert plot.times == sorted(plot.times) and plot.times[-1] == clock.now
    assert plot.series["sessions"][0] == 50 and plot.series["sessions"][-1] == SLOTS + 49


def test_calls_of_other_kinds_are_not_kept():
    history = History(Clock())
    history.record("GetContext", "a", 0.001)
    history.sample({})
    assert all(value is None or value == 0 for series in history.plot(ALL).series.values() for value in series)


def test_tenants_past_the_cap_share_one_series_and_the_bound_holds():
    """Many tenants, every kind, far more samples than slots: the rings never pass the stated bound, in values
    counted and in memory traced."""
    clock = Clock()
    history = History(clock)
    tenants = [f"t{n}" for n in range(120)]
    readings = {tenant: {"sessions": 1, "bytes_archive": 10} for tenant in tenants}
    kinds = ("append", "search_semantic", "search_keyword", "search_hybrid", "lookup_errors", "odd")
    tracemalloc.start()
    try:
        for step in range(SLOTS + 40):
            for tenant in tenants[step % 3::3]:
                history.record(kinds[step % len(kinds)], tenant, 0.0001 * step, hits=1)
            clock.now += STEP_SECONDS
            history.sample(readings)
            if step == SLOTS:
                settled, _ = tracemalloc.get_traced_memory()
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(history.keys()) == MAX_KEYS
    assert OTHER in history.keys() and ALL in history.keys()
    assert history.values_held() == MAX_KEYS * len(SERIES) * SLOTS == BOUND_BYTES // 8
    assert current < 1.2 * BOUND_BYTES, current
    assert current - settled < BOUND_BYTES / 100, (settled, current)  # past the first hour nothing grows
    assert not history.plot(f"t{MAX_TENANTS + 5}").tracked
    other = history.plot(OTHER)
    assert other.series["sessions"][-1] == len(tenants) - MAX_TENANTS


def test_a_call_finished_feeds_prometheus_and_the_listener():
    seen = []
    metrics.listen_to_calls(lambda *call: seen.append(call))
    before = metrics.REGISTRY.get_sample_value("memsvc_call_seconds_count", {"kind": "append"}) or 0
    metrics.call_finished("append", "a", 0.002)
    assert metrics.REGISTRY.get_sample_value("memsvc_call_seconds_count", {"kind": "append"}) == before + 1
    assert seen == [("append", "a", 0.002, 0)]
