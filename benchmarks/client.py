"""What the Python client adds to a call: memsvc_client.Client against the bare generated stub
on the same channel and the same server, interleaved, with a health Check as the floor.

The client builds the request from plain values, adds its metadata, runs the retry loop and
turns the reply into dataclasses; this measures that cost per call (GetContext of a full
16-message window, a keyword Search, a 1-message Append), and the conversion alone in-process.
Then the AsyncClient, whose channels are one per event loop: GetContext on one loop (the
loop's one channel, reused), against a bare grpc.aio channel made and closed for each call (a
connection per call, what the client never does) and against a new loop per call (asyncio.run
each time: each loop's first call opens its channel), with an asyncio health Check as the floor.
Results go to benchmarks/results/client.json.

    .venv/bin/python benchmarks/client.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from common import ServerProcess, interleaved, save
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import AsyncClient, Client, results
from memsvc_client.convert import from_proto, to_proto
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as directory:
        server = ServerProcess(Path(directory) / "data").start()
        try:
            with Client(server.tcp) as client:
                stub = memory_pb2_grpc.MemoryServiceStub(client.channel)
                health = health_pb2_grpc.HealthStub(client.channel)
                for n in range(8):
                    client.append("bench", [("user", f"question {n} about the sandbox deploy"),
                                            ("assistant", f"answer {n}: the sandbox is ready")])
                context = pb.GetContextRequest(session_id="bench")
                search = pb.SearchRequest(session_id="bench", query="sandbox", match=pb.MATCH_KEYWORD)
                message = pb.Message(role=pb.ROLE_USER, content="one more")
                timings = interleaved({
                    "health_check": lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=10),
                    "get_context_stub": lambda: stub.GetContext(context, timeout=10),
                    "get_context_client": lambda: client.get_context("bench"),
                    "search_stub": lambda: stub.Search(search, timeout=10),
                    "search_client": lambda: client.search("bench", "sandbox", match="keyword"),
                    "append_stub": lambda: stub.Append(pb.AppendRequest(session_id="ap", messages=[message]),
                                                       timeout=10),
                    "append_client": lambda: client.append("ap", [("user", "one more")]),
                }, rounds=rounds)
                window = stub.GetContext(context, timeout=10)
            asyncio_timings = per_loop(server.tcp, context, rounds)
        finally:
            server.terminate()
    conversions = 20_000
    start = time.perf_counter()
    for _ in range(conversions):
        from_proto(results.GetContextResponse, window)
    from_window_us = (time.perf_counter() - start) / conversions * 1e6
    start = time.perf_counter()
    for _ in range(conversions):
        to_proto(pb.AppendRequest, {"session_id": "s", "messages": [{"role": "user", "content": "one more"}]})
    to_append_us = (time.perf_counter() - start) / conversions * 1e6
    report = {
        "rounds": rounds,
        "timings": timings,
        "asyncio_timings": asyncio_timings,
        "asyncio_ratios_p50": {name: round(asyncio_timings[name]["p50_ms"] / asyncio_timings["health_check"]["p50_ms"],
                                           3) for name in asyncio_timings},
        "ratios_p50": {name: round(timings[f"{name}_client"]["p50_ms"] / timings[f"{name}_stub"]["p50_ms"], 3)
                       for name in ("get_context", "search", "append")},
        "added_p50_ms": {name: round(timings[f"{name}_client"]["p50_ms"] - timings[f"{name}_stub"]["p50_ms"], 4)
                         for name in ("get_context", "search", "append")},
        "floor_p50_ms": timings["health_check"]["p50_ms"],
        "conversion_us": {"from_proto_16_message_window": round(from_window_us, 1),
                          "to_proto_1_message_append": round(to_append_us, 1)},
    }
    save("client", report)
    for name in ("get_context", "search", "append"):
        print(f"{name:12} stub p50 {timings[f'{name}_stub']['p50_ms']:.3f} ms, client p50 "
              f"{timings[f'{name}_client']['p50_ms']:.3f} ms ({report['ratios_p50'][name]}x, "
              f"+{report['added_p50_ms'][name]} ms)")
    print(f"floor (health check) p50 {report['floor_p50_ms']:.3f} ms; conversion: {report['conversion_us']}")
    for name, timing in asyncio_timings.items():
        print(f"asyncio {name:30} p50 {timing['p50_ms']:.3f} ms, p99 {timing['p99_ms']:.3f} ms "
              f"({report['asyncio_ratios_p50'][name]}x the asyncio floor)")


def per_loop(target: str, context: pb.GetContextRequest, rounds: int) -> dict[str, dict]:
    """GetContext through one AsyncClient on one loop, against a connection per call and a loop per call."""
    memory = AsyncClient(target)
    loop = asyncio.new_event_loop()

    async def health_check() -> object:
        return await health_pb2_grpc.HealthStub(memory.channel).Check(health_pb2.HealthCheckRequest(), timeout=10)

    async def connection_per_call() -> object:
        # A subchannel pool of its own: otherwise grpc may hand the new channel a live connection.
        async with aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            return await memory_pb2_grpc.MemoryServiceStub(channel).GetContext(context, timeout=10)

    try:
        return interleaved({
            "health_check": lambda: loop.run_until_complete(health_check()),
            "get_context_client": lambda: loop.run_until_complete(memory.get_context("bench")),
            "get_context_connection_per_call": lambda: loop.run_until_complete(connection_per_call()),
            "get_context_loop_per_call": lambda: asyncio.run(memory.get_context("bench")),
        }, rounds=rounds)
    finally:
        loop.run_until_complete(memory.close())
        loop.close()


if __name__ == "__main__":
    main()
