"""Append and GetContext latency against the no-op floor (a health Check)
on the same server, at an empty and at a 4 MiB history; then durable
appends/s with 16 concurrent clients.

    .venv/bin/python benchmarks/latency.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import grpc
from common import ServerProcess, interleaved, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.core.records import Record
from memsvc.window import history
from memsvc_client import Client

FOUR_MIB = 4 * 1024 * 1024
SETTLE_SECONDS = 15.0
"Time for the background work of opening a 4 MiB session (embedding, an index build) to finish."


def prefill(data_dir: Path, session_id: str, size: int) -> int:
    """A real history.json of about `size` bytes, written as memsvc writes it."""
    text = "A realistic paragraph of agent conversation, about tools, files and plans. " * 6
    records, total, index = [], 0, 0
    while total < size:
        index += 1
        record = Record(id=index, role="user" if index % 2 else "assistant", content=text,
                        send_at=1_700_000_000_000_000_000 + index)
        records.append(record)
        total += len(text) + 80
    directory = data_dir / "sessions" / session_id
    directory.mkdir(parents=True)
    return history.rewrite(directory / "history.json", records)


def throughput(target: str, clients: int, seconds: float, call: str) -> float:
    """Calls/s of `call` ("append" or "check") from `clients` concurrent clients."""
    counts = [0] * clients
    stop = time.monotonic() + seconds

    def run(worker: int) -> None:
        with Client(target) as client:
            health = health_pb2_grpc.HealthStub(client.channel)
            while time.monotonic() < stop:
                if call == "append":
                    client.append(f"load-{worker}", [("user", "a durable append")])
                else:
                    health.Check(health_pb2.HealthCheckRequest())
                counts[worker] += 1

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        big = prefill(data_dir, "big", FOUR_MIB)
        # Room above 4 MiB so auto compaction does not trim the prefilled history mid-run.
        server = ServerProcess(data_dir, "--max-history-bytes", str(2 * FOUR_MIB)).start()
        try:
            with grpc.insecure_channel(server.tcp) as channel, Client(server.tcp) as client:
                health = health_pb2_grpc.HealthStub(channel)
                check = health_pb2.HealthCheckRequest()
                client.get_context("big")  # open it once, as a live session is
                time.sleep(SETTLE_SECONDS)  # its vectors are embedded and indexed in the background
                results = interleaved({
                    "health_check": lambda: health.Check(check),
                    "append_empty": lambda: client.append("fresh", [("user", "hello")]),
                    "append_4mib": lambda: client.append("big", [("user", "hello")]),
                    "get_context_4mib": lambda: client.get_context("big"),
                }, rounds=args.rounds)
            check_rate = throughput(server.tcp, 16, args.seconds, "check")
            rate = throughput(server.tcp, 16, args.seconds, "append")
        finally:
            server.terminate()
    floor = results["health_check"]["p50_ms"]
    report = {
        "history_bytes_prefilled": big,
        "latency": results,
        "ratios_to_floor_p50": {name: round(r["p50_ms"] / floor, 2) for name, r in results.items()},
        "append_4mib_over_empty_p50": round(results["append_4mib"]["p50_ms"] / results["append_empty"]["p50_ms"], 3),
        "appends_per_second_16_clients": round(rate),
        "checks_per_second_16_clients": round(check_rate),
    }
    for name, r in results.items():
        print(f"{name:18s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  "
              f"x{report['ratios_to_floor_p50'][name]} floor")
    print(f"append at 4 MiB / append at empty (p50): {report['append_4mib_over_empty_p50']}")
    print(f"16 clients: {round(rate)} durable appends/s vs {round(check_rate)} health checks/s "
          f"({rate / check_rate:.2f}x)")
    save("latency", report)


if __name__ == "__main__":
    main()
