"""Append and GetContext latency against the no-op floor (a health Check)
on the same server, at an empty and at a 4 MiB history; then durable
appends/s with 16 concurrent clients, on this disk and on a 2 ms one (a
server whose every sync waits 2 ms more: MEMSVC_FAILPOINTS=durable.fsync=delay:2ms).

Like with like: the floor and every measured call go through the generated
stubs on one channel (memsvc_client adds ~80 us of its own to a call, which a
health Check through a bare stub would not pay). Every server runs all tiers
(the builtin embedder, the archive). The client runs grpc's classic I/O
layer, as clients/python/README.md recommends, unless GRPC_EXPERIMENTS is set.

Side by side, a second server with `http_listen` set answers the same gRPC
calls, and a third set up exactly as the first shows how far two identical
servers differ (the noise); calls are interleaved round by round so noise
hits all alike. Opening the HTTP listener must change nothing for gRPC
clients: its ratios to the first server should sit within the twin's. The
same calls over HTTP/JSON (the Connect protocol, one keep-alive connection)
are then timed beside the same calls over gRPC on that server.

A fifth server reads a tenants file of 1,000 tokens (the calls carry one of
them, a writer of tenant `default`): every call is admitted by its token's
SHA-256, its role and its tenant. Its latencies over the plain server's sit
beside the twin's (issue 25: Append p50 within 5%).

A sixth server exports OpenTelemetry spans of every call and its stages
(tracing_endpoint) to an OTLP receiver on loopback, in a process of its own
(tests/support/otlp_receiver.py): its latencies and rates over the plain
server's sit beside the twin's. The plain server and its twin run with
tracing off, as every other server here: that the code of tracing costs
nothing when off is what the twin's ratios and `make bench-revisions`
against the revision before it show.

    .venv/bin/python benchmarks/latency.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import subprocess
import sys

os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client,-event_engine_listener")  # before grpc
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import grpc
from common import ServerProcess, interleaved, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.core.records import Record
from memsvc.window import history
from memsvc_client import Client
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc

FOUR_MIB = 4 * 1024 * 1024
HTTP_LISTEN = "_with_http_listen"
"Suffix of the figures measured on the server that also has the HTTP listener open."
TWIN = "_twin"
"Suffix of a second server set up exactly as the first: how far two identical servers differ is the noise."
SLOW_DISK = "_fsync_2ms"
"Suffix of a server whose every sync takes 2 ms longer, as on a network volume."
SLOW_SYNC = {"MEMSVC_FAILPOINTS": "durable.fsync=delay:2ms"}
TENANTS_FILE = "_tenants_file_1000_tokens"
"Suffix of a server with a tenants file of TENANT_TOKENS tokens, called with one of them."
TRACING = "_tracing_on"
"Suffix of a server exporting spans of every call to an OTLP receiver on loopback."
TENANT_TOKENS = 1000
BENCH_TOKEN = "benchmark-writer-of-the-default-tenant"
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
        with grpc.insecure_channel(target) as channel:
            health, memory = health_pb2_grpc.HealthStub(channel), memory_pb2_grpc.MemoryServiceStub(channel)
            check, append = health_pb2.HealthCheckRequest(), appending(f"load-{worker}", "a durable append")
            while time.monotonic() < stop:
                if call == "append":
                    memory.Append(append)
                else:
                    health.Check(check)
                counts[worker] += 1

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def side_by_side(targets: dict[str, str], seconds: float) -> dict[str, tuple[float, float]]:
    """(checks/s, appends/s) of each target, run in the order A B C C B A per call so drift hits all alike."""
    order = list(targets) + list(reversed(targets))
    rates = {call: {name: 0.0 for name in targets} for call in ("check", "append")}
    for call in rates:
        for name in order:
            rates[call][name] += throughput(targets[name], 16, seconds / 2, call) / 2
    return {name: (rates["check"][name], rates["append"][name]) for name in targets}


class ConnectJson:
    """Unary calls as HTTP/JSON POSTs (the Connect protocol) on one keep-alive connection."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port))

    def call(self, rpc: str, body: dict) -> dict:
        self.connection.request("POST", f"/memsvc.v1.{rpc}", json.dumps(body),
                                {"content-type": "application/json"})
        reply = self.connection.getresponse()
        payload = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{rpc}: HTTP {reply.status} {payload!r}")
        return json.loads(payload)


def appending(session_id: str, text: str) -> pb.AppendRequest:
    return pb.AppendRequest(session_id=session_id, messages=[pb.Message(role=pb.ROLE_USER, content=text)])


def grpc_calls(prefix: str, channel: grpc.Channel, token: str | None = None) -> dict:
    """The floor and the measured calls, all through the generated stubs on one channel (with `token`, the
    measured calls carry it; a health Check needs none)."""
    health, memory = health_pb2_grpc.HealthStub(channel), memory_pb2_grpc.MemoryServiceStub(channel)
    check, fresh, big = health_pb2.HealthCheckRequest(), appending("fresh", "hello"), appending("big", "hello")
    context = pb.GetContextRequest(session_id="big")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return {
        f"health_check{prefix}": lambda: health.Check(check),
        f"append_empty{prefix}": lambda: memory.Append(fresh, metadata=metadata),
        f"append_4mib{prefix}": lambda: memory.Append(big, metadata=metadata),
        f"get_context_4mib{prefix}": lambda: memory.GetContext(context, metadata=metadata),
    }


def tenants_file(path: Path) -> Path:
    """TENANT_TOKENS tokens over ten tenants, BENCH_TOKEN among them; the file holds their SHA-256 only."""
    tokens = [(f"token-{n}", f"tenant-{n % 10}", "write") for n in range(TENANT_TOKENS - 1)]
    tokens.append((BENCH_TOKEN, "default", "write"))
    path.write_text("".join(f'[[tokens]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\n'
                            f'tenant = "{tenant}"\nrole = "{role}"\n\n' for token, tenant, role in tokens))
    return path


def otlp_receiver() -> subprocess.Popen[str]:
    """The OTLP/HTTP receiver, in a process of its own; its first line is its endpoint."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.otlp_receiver"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)


def spans_received(receiver: subprocess.Popen[str]) -> int:
    """Close the receiver (after the traced server stopped, which exports what it held) and read its count."""
    out, _ = receiver.communicate(timeout=60)
    return int(out.split()[-1])


def latency_over_plain(results: dict, suffix: str) -> dict[str, float]:
    """Each latency of the server named by `suffix` divided by the plain server's."""
    return {f"{name}_{quantile}": round(results[name + suffix][f"{quantile}_ms"] / r[f"{quantile}_ms"], 3)
            for name, r in results.items() if name + suffix in results for quantile in ("p50", "p99")}


def over_plain(results: dict, rates: dict, suffix: str) -> dict[str, float]:
    """Each figure of the server named by `suffix` divided by the plain server's."""
    check_rate, rate = rates[""]
    return {
        **latency_over_plain(results, suffix),
        "appends_per_second_16_clients": round(rates[suffix][1] / rate, 3),
        "checks_per_second_16_clients": round(rates[suffix][0] / check_rate, 3),
    }


def targets(results: dict, rates: dict, suffix: str) -> dict[str, float]:
    """The issue's ratios on one server, each against that server's own floor."""
    floor = results["health_check" + suffix]
    checks, appends = rates[suffix]
    figures = {}
    for name in ("append_empty", "append_4mib", "get_context_4mib"):
        for quantile in ("p50", "p99"):
            figures[f"{name}_{quantile}_over_floor_{quantile}"] = round(
                results[name + suffix][f"{quantile}_ms"] / floor[f"{quantile}_ms"], 2)
    figures["appends_over_checks_per_second_16_clients"] = round(appends / checks, 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    # Room above 4 MiB so auto compaction does not trim the prefilled history mid-run.
    room = ("--max-history-bytes", str(2 * FOUR_MIB))
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tenants = ("--tenants-file", str(tenants_file(Path(tmp) / "tenants.toml")))
        receiver = otlp_receiver()
        stack.callback(receiver.kill)
        assert receiver.stdout is not None
        tracing = ("--tracing-endpoint", receiver.stdout.readline().strip())
        flags = {"": room, TWIN: room, HTTP_LISTEN: (*room, "--http-listen", "127.0.0.1:0"), SLOW_DISK: room,
                 TENANTS_FILE: (*room, *tenants), TRACING: (*room, *tracing)}
        sizes = [prefill(Path(tmp) / f"data{suffix}", "big", FOUR_MIB) for suffix in flags]
        servers = {}
        for suffix, extra in flags.items():
            servers[suffix] = ServerProcess(Path(tmp) / f"data{suffix}", *extra,
                                            env=SLOW_SYNC if suffix == SLOW_DISK else None).start()
            stack.callback(servers[suffix].terminate)
        calls, clients = {}, {}
        for suffix, server in servers.items():
            token = BENCH_TOKEN if suffix == TENANTS_FILE else None
            clients[suffix] = stack.enter_context(Client(server.tcp, token=token))
            clients[suffix].get_context("big")  # open it once, as a live session is
            calls.update(grpc_calls(suffix, stack.enter_context(grpc.insecure_channel(server.tcp)), token))
        time.sleep(SETTLE_SECONDS)  # vectors of the big sessions are embedded and indexed in the background
        # The three servers get the same calls, in an order that rotates: no server always goes first.
        results = interleaved(calls, rounds=args.rounds, rotate=True)
        rates = side_by_side({suffix: server.tcp for suffix, server in servers.items() if suffix != TENANTS_FILE},
                             args.seconds)
        # Then HTTP/JSON beside gRPC on the server that serves both.
        json_client = ConnectJson(servers[HTTP_LISTEN].http)
        grpc_client = clients[HTTP_LISTEN]
        append = {"session_id": "fresh-http", "messages": [{"role": "ROLE_USER", "content": "hello"}]}
        big = {"session_id": "big"}
        results.update(interleaved({
            "grpc_append_empty_beside_http": lambda: grpc_client.append("fresh", [("user", "hello")]),
            "http_json_append_empty": lambda: json_client.call("MemoryService/Append", append),
            "grpc_get_context_4mib_beside_http": lambda: grpc_client.get_context("big"),
            "http_json_get_context_4mib": lambda: json_client.call("MemoryService/GetContext", big),
        }, rounds=args.rounds, rotate=True))
        servers[TRACING].terminate()  # exports the spans it still holds
        spans = spans_received(receiver)
    floor = results["health_check"]["p50_ms"]
    check_rate, rate = rates[""]
    report = {
        "history_bytes_prefilled": sizes[0],
        "latency": results,
        "ratios_to_floor_p50": {name: round(r["p50_ms"] / floor, 2) for name, r in results.items()},
        "append_4mib_over_empty_p50": round(results["append_4mib"]["p50_ms"] / results["append_empty"]["p50_ms"], 3),
        "appends_per_second_16_clients": round(rate),
        "checks_per_second_16_clients": round(check_rate),
        "with_http_listen_over_without": over_plain(results, rates, HTTP_LISTEN),
        "twin_over_without": over_plain(results, rates, TWIN),
        "tenants_file_1000_tokens_over_without": latency_over_plain(results, TENANTS_FILE),
        "tracing_on_over_without": over_plain(results, rates, TRACING),
        "tracing_spans_exported": spans,
        "http_json_over_grpc_p50": {name: round(results[f"http_json_{name}"]["p50_ms"]
                                                / results[f"grpc_{name}_beside_http"]["p50_ms"], 3)
                                    for name in ("append_empty", "get_context_4mib")},
        "targets": {suffix or "this_disk": targets(results, rates, suffix) for suffix in ("", TWIN, SLOW_DISK)},
    }
    for name, r in results.items():
        print(f"{name:38s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  "
              f"x{report['ratios_to_floor_p50'][name]} floor")
    print(f"append at 4 MiB / append at empty (p50): {report['append_4mib_over_empty_p50']}")
    for suffix, (checks, appends) in rates.items():
        print(f"16 clients{suffix}: {round(appends)} durable appends/s vs {round(checks)} health checks/s "
              f"({appends / checks:.2f}x)")
    print("with http_listen / without:", json.dumps(report["with_http_listen_over_without"]))
    print("twin (the noise) / without:", json.dumps(report["twin_over_without"]))
    print("tenants_file of 1,000 tokens / without:", json.dumps(report["tenants_file_1000_tokens_over_without"]))
    print(f"tracing on ({spans} spans exported) / without:", json.dumps(report["tracing_on_over_without"]))
    print("Append p50 over the plain server's (tracing off): twin "
          f"{report['twin_over_without']['append_empty_p50']}, tracing on "
          f"{report['tracing_on_over_without']['append_empty_p50']}; at 4 MiB: twin "
          f"{report['twin_over_without']['append_4mib_p50']}, tracing on "
          f"{report['tracing_on_over_without']['append_4mib_p50']}")
    print("HTTP/JSON / gRPC on one server (p50):", json.dumps(report["http_json_over_grpc_p50"]))
    for name, figures in report["targets"].items():
        print(f"targets, {name}:", json.dumps(figures))
    save("latency", report)


if __name__ == "__main__":
    main()
