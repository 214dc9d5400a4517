"""Prometheus metrics: the registry helpers, and the port of a real server scraped over HTTP."""

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.rpc.instrument import observe_call
from memsvc.runtime import metrics
from memsvc_client import MemsvcError
from memsvc_client.v1 import memory_pb2 as pb
from tests.support import scrape

TOKEN = "metrics-test-token"


def handled(samples, method: str, code: str, service: str = "memsvc.v1.MemoryService") -> float:
    labels = frozenset({"grpc_type": "unary", "grpc_service": service, "grpc_method": method,
                        "grpc_code": code}.items())
    return samples.get(("grpc_server_handled_total", labels), 0.0)


def handling_count(samples, method: str, service: str = "memsvc.v1.MemoryService") -> float:
    labels = frozenset({"grpc_type": "unary", "grpc_service": service, "grpc_method": method}.items())
    return samples.get(("grpc_server_handling_seconds_count", labels), 0.0)


def test_rpc_counters_and_latency_move_with_real_calls(make_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = make_server("--metrics-listen", "127.0.0.1:0", "--token-file", str(token_file))
    before = scrape(server)
    assert handled(before, "Append", "OK") == 0
    with server.client(token=TOKEN) as client, server.client() as stranger:
        for index in range(3):
            client.append(f"s{index % 2}", [("user", f"hello {index}")])
        client.get_context("s0")
        with pytest.raises(MemsvcError):
            client.append("..", [("user", "x")])
        with pytest.raises(MemsvcError):
            client.get_summary("nobody")
        with pytest.raises(MemsvcError):
            stranger.append("s0", [("user", "no token")])
        client.record_error("web_fetch", "HTTP 403", "send a User-Agent")
    after = scrape(server)
    assert handled(after, "Append", "OK") == 3
    assert handled(after, "Append", "INVALID_ARGUMENT") == 1
    assert handled(after, "Append", "UNAUTHENTICATED") == 1
    assert handled(after, "GetContext", "OK") == 1
    assert handled(after, "GetSummary", "NOT_FOUND") == 1
    assert handled(after, "RecordError", "OK", service="memsvc.v1.ErrorMemoryService") == 1
    assert handling_count(after, "Append") == 5
    bucket = frozenset({"grpc_type": "unary", "grpc_service": "memsvc.v1.MemoryService", "grpc_method": "Append",
                        "le": "+Inf"}.items())
    assert after[("grpc_server_handling_seconds_bucket", bucket)] == 5
    assert after[("grpc_server_handling_seconds_sum", frozenset(
        {"grpc_type": "unary", "grpc_service": "memsvc.v1.MemoryService", "grpc_method": "Append"}.items()))] > 0
    assert after[("memsvc_sessions", frozenset())] == 2
    assert after[("memsvc_open_sessions", frozenset())] >= 2
    assert after[("process_resident_memory_bytes", frozenset())] > 0


def test_streaming_calls_are_counted_with_their_type(make_server):
    server = make_server("--metrics-listen", "127.0.0.1:0")
    with grpc.insecure_channel(server.tcp) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        started = frozenset({"grpc_type": "server_stream", "grpc_service": "grpc.health.v1.Health",
                             "grpc_method": "Watch"}.items())
        assert scrape(server)[("grpc_server_started_total", started)] == 1
        watch.cancel()


def test_no_metrics_port_unless_asked(server):
    assert server.metrics == ""
    with server.client() as client:
        client.append("s", [("user", "x")])


def test_a_bad_metrics_address_stops_the_start(make_server):
    with pytest.raises(RuntimeError, match="metrics_listen 'nowhere' must be HOST:PORT"):
        make_server("--metrics-listen", "nowhere")


def test_readings_are_taken_at_scrape_time_and_replaced_by_name():
    values = iter([1.0, 2.0])
    metrics.gauge("test_depth", "A test reading.", lambda: next(values))
    assert metrics.REGISTRY.get_sample_value("memsvc_test_depth") == 1.0
    assert metrics.REGISTRY.get_sample_value("memsvc_test_depth") == 2.0
    metrics.gauge("test_depth", "A test reading.", lambda: 7)
    assert metrics.REGISTRY.get_sample_value("memsvc_test_depth") == 7.0
    metrics.total("test_done_total", "A test count.", lambda: 41)
    assert metrics.REGISTRY.get_sample_value("memsvc_test_done_total") == 41.0


def test_a_failing_reading_drops_only_its_own_sample():
    metrics.gauge("test_broken", "Raises.", lambda: 1 / 0)
    metrics.gauge("test_fine", "Works.", lambda: 3)
    assert metrics.REGISTRY.get_sample_value("memsvc_test_broken") is None
    assert metrics.REGISTRY.get_sample_value("memsvc_test_fine") == 3.0


def test_instruments_are_shared_by_name_and_named_under_the_prefix():
    first = metrics.counter("test_events_total", "Test events.", ("kind",))
    assert metrics.counter("test_events_total", "Test events.", ("kind",)) is first
    first.labels("a").inc(2)
    assert metrics.REGISTRY.get_sample_value("memsvc_test_events_total", {"kind": "a"}) == 2.0
    metrics.histogram("test_seconds", "Test durations.").observe(0.003)
    assert metrics.REGISTRY.get_sample_value("memsvc_test_seconds_count") == 1.0
    with pytest.raises(TypeError):
        metrics.histogram("test_events_total", "Not a histogram.")
    with pytest.raises(ValueError):
        metrics.gauge("memsvc_twice", "Prefixed by hand.", lambda: 0)
    with pytest.raises(ValueError):
        metrics.total("test_done", "Counters end in _total.", lambda: 0)


def test_archive_and_compaction_metrics(make_server):
    server = make_server("--metrics-listen", "127.0.0.1:0", "--max-history-messages", "2")
    with server.client() as client:
        for index in range(3):
            client.append("s", [("user", f"q{index}"), ("assistant", "a")])
        assert client.compact("s").removed == 4
    samples = scrape(server)
    assert samples[("memsvc_compactions_total", frozenset({"trigger": "manual"}.items()))] == 1
    assert samples[("memsvc_archive_committed_operations_total", frozenset())] >= 3
    assert samples[("memsvc_archive_queue_depth", frozenset())] == 0


def test_a_search_naming_no_match_is_plotted_as_the_mode_it_runs():
    seen = []
    metrics.listen_to_calls(lambda kind, *_: seen.append(kind))
    for request in (pb.SearchRequest(session_id="s", query="when do we ship?"),
                    pb.SearchRequest(session_id="s", query_embedding=[0.5, 0.5]),
                    pb.SearchRequest(session_id="s", query="ship", match=pb.MATCH_KEYWORD)):
        observe_call("Search", "default", request, None, 0.001)
    assert seen == ["search_hybrid", "search_semantic", "search_keyword"]
