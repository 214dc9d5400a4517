"""Append through the sharding proxy against Append straight to the shard, in one interleaved run.

Three memsvc shards and Debian's HAProxy running deploy/haproxy/haproxy.cfg (addresses moved to
loopback) in front of them. Two sessions the proxy routes to the same shard: one is appended to
through the proxy, the other straight to that shard, so both histories grow alike; a health Check
on the shard is the floor, and one through the proxy shows what the hop itself costs. Then 16
clients, each on a session of its own on that shard, append for a few seconds through the proxy,
then straight to it, for throughput.

    .venv/bin/python benchmarks/proxy.py [--rounds 2000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import grpc
from common import interleaved, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import Client
from tests.support.haproxy import Proxy
from tests.support.shards import owner, start_shards, stop_shards

NAMES = ("memsvc-0", "memsvc-1", "memsvc-2")


def two_sessions_on_one_shard(proxy: Client) -> tuple[str, str, str]:
    """(shard, session appended through the proxy, session appended straight)."""
    seen: dict[str, str] = {}
    for number in range(1000):
        session = f"bench-{number}"
        shard = owner(proxy, session)
        if shard in seen:
            return shard, seen[shard], session
        seen[shard] = session
    raise RuntimeError("no two sessions on one shard")


def sessions_on(proxy: Client, shard: str, prefix: str, count: int) -> list[str]:
    """`count` session ids the proxy routes to `shard`."""
    found = []
    for number in range(100_000):
        if owner(proxy, f"{prefix}-{number}") == shard:
            found.append(f"{prefix}-{number}")
            if len(found) == count:
                return found
    raise RuntimeError(f"too few sessions on {shard}")


def throughput(target: str, sessions: list[str], seconds: float) -> float:
    """Durable appends per second from one client thread per session."""
    counts = [0] * len(sessions)
    stop = threading.Event()

    def append(index: int) -> None:
        with Client(target) as client:
            while not stop.is_set():
                client.append(sessions[index], [("user", "a message of some length, as agents write")])
                counts[index] += 1

    threads = [threading.Thread(target=append, args=(index,)) for index in range(len(sessions))]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        shards = start_shards(Path(tmp), NAMES)
        proxy = Proxy({name: shard.tcp for name, shard in shards.items()}).start()
        try:
            with Client(proxy.target) as through, grpc.insecure_channel(proxy.target) as proxy_channel:
                shard, proxied, direct_session = two_sessions_on_one_shard(through)
                with Client(shards[shard].tcp) as direct, grpc.insecure_channel(shards[shard].tcp) as channel:
                    floor = health_pb2_grpc.HealthStub(channel)
                    proxied_floor = health_pb2_grpc.HealthStub(proxy_channel)
                    request = health_pb2.HealthCheckRequest()
                    message = [("user", "a message of some length, as agents write")]
                    latency = interleaved({
                        "health_check_direct": lambda: floor.Check(request, timeout=5),
                        "health_check_proxy": lambda: proxied_floor.Check(request, timeout=5),
                        "append_direct": lambda: direct.append(direct_session, message),
                        "append_proxy": lambda: through.append(proxied, message),
                    }, args.rounds, rotate=True)
                # Throughput on that one shard, each client on a session of its own: through the proxy, then not.
                proxy_rate = throughput(proxy.target, sessions_on(through, shard, "via", args.clients), args.seconds)
                direct_rate = throughput(shards[shard].tcp, sessions_on(through, shard, "straight", args.clients),
                                         args.seconds)
        finally:
            proxy.close()
            stop_shards(shards.values())

    def ratio(name: str, base: str) -> dict[str, float]:
        return {key: round(latency[name][key] / latency[base][key], 2) for key in ("p50_ms", "p99_ms")}

    result = {
        "rounds": args.rounds, "latency": latency,
        "append_proxy_over_direct": ratio("append_proxy", "append_direct"),
        "health_check_proxy_over_direct": ratio("health_check_proxy", "health_check_direct"),
        "append_direct_over_floor": ratio("append_direct", "health_check_direct"),
        "append_proxy_over_floor": ratio("append_proxy", "health_check_direct"),
        "throughput": {"clients": args.clients, "seconds": args.seconds,
                       "appends_per_second_proxy": round(proxy_rate), "appends_per_second_direct": round(direct_rate),
                       "proxy_over_direct": round(proxy_rate / direct_rate, 2),
                       "note": "every session on the same shard, one client thread each"},
    }
    save("proxy", result)
    for key in ("append_proxy_over_direct", "health_check_proxy_over_direct", "append_direct_over_floor",
                "append_proxy_over_floor", "throughput"):
        print(key, result[key])


if __name__ == "__main__":
    main()
