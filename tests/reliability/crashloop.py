"""A seeded, bounded kill -9 loop over a real server.

Each iteration starts the server on the same data directory, with either a
failure point that kills it at an exact place inside a write (drawn from
the seed) or a SIGKILL from outside after a random delay. Meanwhile clients
append to several sessions, compact, and search. After the kill the server
is restarted clean and every acknowledged message is checked: found exactly
once by keyword search (whether it is still in history.json or only in the
archive), ids unique and increasing, history.json a valid JSON array.

    .venv/bin/python -m tests.reliability.crashloop --iterations 100 --seed 7     (make test-crash)
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import threading
import time
from pathlib import Path

import msgspec

from memsvc_client import MemsvcError
from tests.support import ServerProcess

KILL_POINTS = (
    "durable.write_at.start", "durable.write_at.written", "durable.write_at.synced",
    "durable.atomic_write.synced", "durable.atomic_write.renamed",
    "archive.commit", "lifecycle.compact.flushed",
)
SESSIONS = ("alpha", "beta", "gamma")
SERVER_FLAGS = ("--max-history-bytes", "6000", "--max-message-bytes", "4000", "--max-history-messages", "4",
                "--archive-commit-seconds", "0.02")


class Findings(msgspec.Struct):
    iterations: int = 0
    acknowledged: int = 0
    verified: int = 0
    kills: dict[str, int] = {}
    problems: list[str] = []


def _work(server: ServerProcess, session_id: str, label: str, acked: list[str], stop: threading.Event,
          rng: random.Random) -> None:
    with server.client(timeout=5) as client:
        sequence = 0
        while not stop.is_set():
            token = f"{label}n{sequence}w"
            try:
                client.append(session_id, [("user", f"question {token} " + "pad " * rng.randint(0, 60)),
                                           ("assistant", "answer")])
                acked.append(token)
                sequence += 1
                if rng.random() < 0.1:
                    client.compact(session_id)
                if rng.random() < 0.1:
                    client.search(session_id, token, match="keyword")
            except MemsvcError:
                return  # the server died under us: whatever was not acknowledged may be lost


def iteration(number: int, data_dir: Path, rng: random.Random, findings: Findings,
              acked: dict[str, list[str]]) -> None:
    point = rng.choice(KILL_POINTS + ("external",))
    env = {} if point == "external" else {"MEMSVC_FAILPOINTS": f"{point}=kill@{rng.randint(1, 40)}"}
    server = ServerProcess(data_dir, *SERVER_FLAGS, env=env).start()
    stop = threading.Event()
    workers = [threading.Thread(target=_work, args=(server, session_id, f"i{number}{session_id[0]}",
                                                    acked[session_id], stop, random.Random(rng.random())))
               for session_id in SESSIONS]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + rng.uniform(0.3, 2.0)
    assert server.process is not None
    while server.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    died_by_itself = server.process.poll() is not None
    if not died_by_itself:
        server.kill()
    stop.set()
    for worker in workers:
        worker.join()
    name = point if died_by_itself else "external"
    findings.kills[name] = findings.kills.get(name, 0) + 1
    findings.iterations += 1


def verify(data_dir: Path, acked: dict[str, list[str]], findings: Findings) -> None:
    server = ServerProcess(data_dir, *SERVER_FLAGS).start()
    try:
        with server.client(timeout=30) as client:
            for session_id, tokens in acked.items():
                history = data_dir / "sessions" / session_id / "history.json"
                if history.exists():
                    msgspec.json.decode(history.read_bytes())  # a valid JSON array, or this raises
                ids = [m.id for m in client.get_context(session_id).window]
                if ids != sorted(set(ids)):
                    findings.problems.append(f"{session_id}: window ids not increasing: {ids}")
                for token in tokens:
                    hits = client.search(session_id, token, match="keyword", limit=32).hits
                    found = [h for h in hits if token in h.message.content.split()]
                    if len(found) != 1:
                        findings.problems.append(f"{session_id}: {token} found {len(found)} times")
                    findings.verified += 1
    finally:
        server.terminate()


def run(iterations: int, seed: int, data_dir: Path) -> Findings:
    rng = random.Random(seed)
    findings = Findings()
    acked: dict[str, list[str]] = collections.defaultdict(list)
    for session_id in SESSIONS:
        acked[session_id] = []
    for number in range(iterations):
        iteration(number, data_dir, rng, findings, acked)
    findings.acknowledged = sum(map(len, acked.values()))
    verify(data_dir, acked, findings)
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        findings = run(args.iterations, args.seed, Path(tmp) / "data")
    print(f"{findings.iterations} kill iterations (seed {args.seed}) in {time.monotonic() - started:.0f} s")
    print(f"kills by point: {dict(sorted(findings.kills.items()))}")
    print(f"acknowledged messages: {findings.acknowledged}; verified exactly once: "
          f"{findings.verified - len(findings.problems)}")
    print(f"findings: {len(findings.problems)}")
    for problem in findings.problems[:50]:
        print(f"  {problem}")
    raise SystemExit(1 if findings.problems else 0)


if __name__ == "__main__":
    main()
