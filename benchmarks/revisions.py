"""The same calls against two or more revisions of memsvc, side by side in one run.

For changes that must not change speed (a restructure, a rename): each
revision is checked out into a temporary git worktree and served by this
checkout's Python environment, one more server runs the first revision again
as a twin (its ratio to the first is the noise), and every round calls
Check, Append, GetContext, keyword and semantic Search on all of them in a
shuffled order. With --each-twice every revision is served twice and its p50
is the mean of its two servers': for finding which of several revisions
moved a figure smaller than one server's noise. Requests use the contract's
oldest shape, so any revision since the first contract answers them.

    .venv/bin/python benchmarks/revisions.py 98ef14d ffff406 --rounds 500
    .venv/bin/python benchmarks/revisions.py d034eea f4ffcb9 82a0260 HEAD --each-twice --rounds 1200
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
    parser.add_argument("revisions", nargs="+", metavar="REVISION", help="two or more; ratios are over the first")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--each-twice", action="store_true", help="serve every revision twice, not only the first")
    args = parser.parse_args()
    if len(args.revisions) < 2:
        parser.error("name at least two revisions")
    scratch = Path(tempfile.mkdtemp())
    rng = random.Random(3)

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(12))

    revisions = list(dict.fromkeys(args.revisions))
    checkouts = {revision: scratch / f"checkout-{number}" for number, revision in enumerate(revisions)}
    # (label, revision): the first revision's second server is its twin; with --each-twice every revision's is.
    servings = [(revision, revision) for revision in revisions]
    servings += [(f"{revision} twin", revision) for revision in (revisions if args.each_twice else revisions[:1])]
    for revision, checkout in checkouts.items():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), revision],
                       check=True, capture_output=True)
    servers: dict[str, Served] = {}
    try:
        for number, (label, revision) in enumerate(servings):
            servers[label] = Served(checkouts[revision], scratch / f"data-{number}")
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
    names = list(calls(servers[revisions[0]], text))
    timings = {label: {name: percentiles(samples[(label, name)]) for name in names} for label in servers}

    def p50(revision: str, name: str) -> float:
        """The revision's p50; with --each-twice, the mean of its two servers'."""
        served = [label for label, of in servings if of == revision and (args.each_twice or label == revision)]
        return sum(timings[label][name]["p50_ms"] for label in served) / len(served)

    first = revisions[0]
    ratios = {name: {**{f"{revision}_over_first": round(p50(revision, name) / p50(first, name), 3)
                        for revision in revisions[1:]},
                     "twin_over_first": round(timings[f"{first} twin"][name]["p50_ms"] / timings[first][name]["p50_ms"],
                                              3)}
              for name in names}
    result = {"revisions": revisions, "each_twice": args.each_twice, "rounds": args.rounds, "p50_ratios": ratios,
              "latency": timings}
    print(json.dumps(ratios, indent=1))
    save("revisions", result)


if __name__ == "__main__":
    main()
