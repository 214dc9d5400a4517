"""Sessions sharded behind a real proxy: three memsvc shards, Debian's HAProxy running
deploy/haproxy/haproxy.cfg in front of them (addresses moved to loopback, nothing else), and one
real PostgreSQL for the error memory they share.

The conformance scenario runs through the proxy from Python, Node and Go; each session lives on
exactly one shard, the one the proxy routes it to; a lesson recorded through one shard is found
through another; the health check speaks gRPC's health protocol; and killing a shard fails only
its sessions, with UNAVAILABLE, while the other sessions and error memory keep working. Debian's
nginx running deploy/nginx/nginx.conf in front of the same shards does the same, by its own ring.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from memsvc_client import Client, UnavailableError
from tests.support import ServerProcess, free_port, wait_for
from tests.support import haproxy as haproxy_support
from tests.support.conformance import comparable, run_python, runner
from tests.support.haproxy import Proxy
from tests.support.nginx import Nginx
from tests.support.nginx import require as require_nginx
from tests.support.postgres import PostgresServer
from tests.support.shards import lessons_flags, owner, start_shards, stop_shards, stored_sessions

NAMES = ("memsvc-0", "memsvc-1", "memsvc-2")
SESSIONS = [f"user-{number}" for number in range(60)]


@dataclass
class Cluster:
    shards: dict[str, ServerProcess]
    proxy: Proxy


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    haproxy_support.require()
    database = postgres.create_database()
    # --max-history-messages 2: what the conformance scenario expects of its server.
    shards = start_shards(tmp_path_factory.mktemp("sharded"), NAMES, "--max-history-messages", "2",
                          *lessons_flags(postgres, database))
    proxy = Proxy({name: shard.tcp for name, shard in shards.items()})
    try:
        proxy.start()
        wait_for(lambda: all(state == "UP" for state, _ in proxy.states("any").values()), timeout=30)
        yield Cluster(shards, proxy)
    finally:
        proxy.close()
        stop_shards(shards.values())
        postgres.drop_database(database)


@pytest.fixture(scope="module")
def through_proxy(cluster: Cluster) -> Iterator[Client]:
    with Client(cluster.proxy.target) as client:
        yield client


@pytest.fixture(scope="module")
def reference(cluster: Cluster) -> list[dict]:
    return run_python(cluster.proxy.target, "shard-conf-reference")


@pytest.mark.parametrize("language", ["python", "node", "go"])
def test_the_conformance_scenario_through_the_proxy(cluster: Cluster, reference: list[dict], language: str) -> None:
    session = f"shard-conf-{language}"
    results = runner(language)(cluster.proxy.target, session)
    assert comparable(results, across_servers=True) == comparable(reference, across_servers=True)
    info = next(result["response"] for result in results if result["name"] == "server info")
    assert info["shardName"] in NAMES and info["sessionStored"] is True
    with Client(cluster.proxy.target) as client:
        assert owner(client, session) == info["shardName"], "the session's calls all reached its owner"


def test_each_session_lives_on_exactly_one_shard_the_one_the_proxy_routes_it_to(
        cluster: Cluster, through_proxy: Client) -> None:
    for session in SESSIONS:
        through_proxy.append(session, [("user", f"hello from {session}"), ("assistant", "hi")])
    stored = {name: stored_sessions(shard) & set(SESSIONS) for name, shard in cluster.shards.items()}
    where = collections.Counter(session for sessions in stored.values() for session in sessions)
    assert set(where) == set(SESSIONS) and set(where.values()) == {1}, "every session on exactly one shard"
    assert all(stored.values()), f"the ring spreads sessions over every shard: {[len(s) for s in stored.values()]}"
    with Client(cluster.proxy.next_target) as next_ring:
        for name, sessions in stored.items():
            for session in sessions:
                assert owner(through_proxy, session) == name
                assert owner(next_ring, session) == name, "between reshardings ring-next is ring"
                assert [m.content for m in through_proxy.get_context(session).window][0] == f"hello from {session}"
    for name, shard in cluster.shards.items():
        with shard.client() as direct:
            info = direct.get_server_info(sorted(stored[name])[0])
            assert info.shard_name == name and info.session_stored and len(info.data_dir_id) == 32


def test_a_lesson_recorded_through_one_shard_is_found_through_another(cluster: Cluster,
                                                                      through_proxy: Client) -> None:
    with cluster.shards["memsvc-0"].client() as first, cluster.shards["memsvc-1"].client() as second:
        recorded = first.record_error("web_fetch", "HTTP 429 Too Many Requests from api.example",
                                      "wait for Retry-After, then retry once", keywords=["rate-limit"])
        assert recorded.stored
        found = second.lookup_errors("web_fetch", "got 429 Too Many Requests")
        assert [record.id for record in found.records] == [recorded.record.id]
        assert "Retry-After" in found.related_errors
    assert [r.id for r in through_proxy.search_errors("rate-limit").records] == [recorded.record.id]


def test_the_health_check_speaks_grpc_and_passes_only_serving_shards(cluster: Cluster) -> None:
    """The deploy file's check against three servers: a memsvc, a gRPC server reporting NOT_SERVING
    and a closed port."""
    assert {state for state, _ in cluster.proxy.states("any").values()} == {"UP"}
    assert {check for _, check in cluster.proxy.states("any").values()} == {"L7OK"}
    not_serving = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    reported = health.HealthServicer()
    reported.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(reported, not_serving)
    port = not_serving.add_insecure_port("127.0.0.1:0")
    not_serving.start()
    proxy = Proxy({"memsvc-0": cluster.shards["memsvc-0"].tcp, "memsvc-1": f"127.0.0.1:{port}",
                   "memsvc-2": f"127.0.0.1:{free_port()}"})
    try:
        proxy.start()
        wait_for(lambda: proxy.states("any")["memsvc-1"][0] == "DOWN" and proxy.states("any")["memsvc-2"][0] == "DOWN",
                 timeout=30)
        states = proxy.states("any")
        assert states["memsvc-0"] == ("UP", "L7OK")
        assert states["memsvc-1"][1] in ("L7RSP", "L7TOUT"), "answered, but not SERVING"
        assert states["memsvc-2"][1] == "L4CON"
    finally:
        proxy.close()
        not_serving.stop(None)


def test_killing_a_shard_fails_only_its_sessions_and_the_rest_keep_working(cluster: Cluster,
                                                                           through_proxy: Client) -> None:
    placed = {session: owner(through_proxy, session) for session in SESSIONS}
    victim = "memsvc-2"
    lost = [session for session, name in placed.items() if name == victim]
    kept = [session for session, name in placed.items() if name != victim]
    assert lost and kept
    cluster.shards[victim].kill()
    try:
        # Without the client's retries, to see what the proxy answers each call.
        with Client(cluster.proxy.target, retry=None, timeout=10) as once:
            for session in lost[:5]:
                with pytest.raises(UnavailableError):
                    once.get_context(session)
                with pytest.raises(UnavailableError):
                    once.append(session, [("user", "written while its shard is down")])
                with pytest.raises(UnavailableError):
                    once.get_server_info(session)
        for session in kept:
            assert through_proxy.append(session, [("user", "still here")], timeout=5).messages[0].id == 3
        # Calls naming no session still find a shard, before and after the check marks it down.
        for _ in range(6):
            assert through_proxy.search_errors("rate-limit", timeout=5).records
        wait_for(lambda: cluster.proxy.states("any")[victim][0] == "DOWN", timeout=30)
        assert through_proxy.lookup_errors("web_fetch", "429 Too Many Requests", timeout=5).records
    finally:
        cluster.shards[victim].restart()
    for session in lost:
        assert owner(through_proxy, session) == victim, "back on its own shard: it never moved"
        assert [m.content for m in through_proxy.get_context(session).window] == [f"hello from {session}", "hi"]
    elsewhere = set().union(*(stored_sessions(cluster.shards[name]) for name in NAMES if name != victim))
    assert not set(lost) & elsewhere, "nothing of its sessions was written on another shard"


@pytest.fixture(scope="module")
def nginx(cluster: Cluster) -> Iterator[Nginx]:
    require_nginx()
    proxy = Nginx({name: shard.tcp for name, shard in cluster.shards.items()}).start()
    yield proxy
    proxy.close()


def test_nginx_routes_each_session_to_one_shard_by_its_own_ring(cluster: Cluster, nginx: Nginx,
                                                                reference: list[dict]) -> None:
    results = run_python(nginx.target, "nginx-conformance")
    assert comparable(results, across_servers=True) == comparable(reference, across_servers=True)
    sessions = [f"via-nginx-{number}" for number in range(30)]
    with Client(nginx.target) as through, Client(nginx.next_target) as next_ring:
        for session in sessions:
            through.append(session, [("user", f"hello from {session}")])
        stored = {name: stored_sessions(shard) & set(sessions) for name, shard in cluster.shards.items()}
        where = collections.Counter(session for found in stored.values() for session in found)
        assert set(where) == set(sessions) and set(where.values()) == {1} and all(stored.values())
        for name, found in stored.items():
            for session in found:
                assert owner(through, session) == owner(next_ring, session) == name
        recorded = through.record_error("shell", "nginx: worker process exited on signal 9", "raise the memory limit",
                                        keywords=["oom-kill"])
        assert [r.id for r in through.search_errors("oom-kill").records] == [recorded.record.id], \
            "calls naming no session reach a shard"


def test_killing_a_shard_behind_nginx_fails_only_its_sessions(cluster: Cluster, nginx: Nginx) -> None:
    with Client(nginx.target) as through:
        placed = {session: owner(through, session) for session in (f"nginx-kill-{n}" for n in range(30))}
        for session in placed:
            through.append(session, [("user", "before")])
    victim = "memsvc-1"
    lost = [session for session, name in placed.items() if name == victim]
    kept = [session for session, name in placed.items() if name != victim]
    assert lost and kept
    cluster.shards[victim].kill()
    try:
        with Client(nginx.target, retry=None, timeout=10) as once:
            for session in lost:
                with pytest.raises(UnavailableError):
                    once.append(session, [("user", "written while its shard is down")])
            for session in kept:
                assert once.append(session, [("user", "still here")]).messages[0].id == 2
            once.record_error("shell", "segfault in the exporter", "pin the exporter version", keywords=["segv"])
            for _ in range(6):
                assert once.search_errors("segv").records
    finally:
        cluster.shards[victim].restart()
    elsewhere = set().union(*(stored_sessions(cluster.shards[name]) for name in NAMES if name != victim))
    assert not set(lost) & elsewhere, "nothing of its sessions was written on another shard"
