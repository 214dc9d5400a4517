"""The same calls against two revisions of memsvc, side by side in one run.

For changes that must not change speed (a restructure, a rename): each
revision is checked out into a temporary git worktree and served by this
checkout's Python environment, a third server runs the first revision again
as a twin (its ratio to the first is the noise), and every round calls
Check, Append, GetContext, keyword and semantic Search on all three in a
shuffled order. Requests use the contract's oldest shape, so any revision
since the first contract answers them.

    .venv/bin/python benchmarks/revisions.py 98ef14d ffff406 --rounds 500
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from common import percentiles, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
WORDS = "deploy billing sandbox friday rollback database index cache queue worker".split()
HISTORY = 300
"Messages appended to each server's session before timing."


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Served:
    """One revision's server on a port of its own, with its stubs."""

    def __init__(self, checkout: Path, data_dir: Path):
        port = _port()
        # A revision that keeps the client package apart has it on the path too; this checkout's
        # installed one would otherwise be imported in its place.
        path = ":".join(str(p) for p in (checkout, checkout / "clients/python/src") if p.exists())
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memsvc", "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"],
            # The builtin embedder on every revision: since the default became a model, the semantic row would
            # time the model's query embedding rather than the code around it.
            env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin", "MEMSVC_EMBEDDER": "builtin"}, cwd=checkout,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(self.channel).result(timeout=120)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)

    def stop(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(30)


def calls(served: Served, text: Callable[[], str]) -> dict[str, Callable[[], object]]:
    memory = served.memory
    return {
        "health_check_floor": lambda: served.health.Check(health_pb2.HealthCheckRequest()),
        "append": lambda: memory.Append(pb.AppendRequest(session_id="s", messages=[
            pb.Message(role=pb.ROLE_USER, content=text())])),
        "get_context": lambda: memory.GetContext(pb.GetContextRequest(session_id="s")),
        "keyword_search": lambda: memory.Search(pb.SearchRequest(session_id="s", query="billing",
                                                                 match=pb.MATCH_KEYWORD, include_window=True)),
        "semantic_search": lambda: memory.Search(pb.SearchRequest(session_id="s", query="rollback of the database",
                                                                  match=pb.MATCH_SEMANTIC, include_window=True)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp())
    rng = random.Random(3)

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(12))

    checkouts = {}
    for label, revision in (("first", args.first), ("second", args.second)):
        checkouts[label] = scratch / label
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkouts[label]), revision],
                       check=True, capture_output=True)
    servers: dict[str, Served] = {}
    try:
        for label, checkout in (("first", checkouts["first"]), ("second", checkouts["second"]),
                                ("twin", checkouts["first"])):
            servers[label] = Served(checkout, scratch / f"data-{label}")
            for _ in range(HISTORY):
                calls(servers[label], text)["append"]()
        time.sleep(3)  # the derived stores catch up before timing
        every = [(label, name, call) for label, served in servers.items() for name, call in calls(served, text).items()]
        samples: dict[tuple[str, str], list[float]] = {(label, name): [] for label, name, _ in every}
        for round_number in range(args.rounds + 50):
            rng.shuffle(every)
            for label, name, call in every:
                start = time.perf_counter()
                call()
                if round_number >= 50:
                    samples[(label, name)].append(time.perf_counter() - start)
    finally:
        for served in servers.values():
            served.stop()
        for checkout in checkouts.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    timings = {label: {name: percentiles(samples[(label, name)]) for name in calls(servers[label], text)}
               for label in servers}
    def over_first(label: str, name: str) -> float:
        return round(timings[label][name]["p50_ms"] / timings["first"][name]["p50_ms"], 3)

    ratios = {name: {"second_over_first": over_first("second", name), "twin_over_first": over_first("twin", name)}
              for name in timings["first"]}
    result = {"first": args.first, "second": args.second, "rounds": args.rounds, "p50_ratios": ratios,
              "latency": timings}
    print(json.dumps(ratios, indent=1))
    save("revisions", result)


if __name__ == "__main__":
    main()
