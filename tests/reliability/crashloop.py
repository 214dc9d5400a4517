"""A seeded, bounded kill -9 loop over a real server.

Each iteration starts the server on the same data directory, with either a
failure point that kills it at an exact place inside a write (drawn from
the seed: inside an Append, a Compact, a Reset or a RemoveSession) or a
SIGKILL from outside after a random delay. Meanwhile one client per session
appends, and now and then compacts, searches, resets or removes its session.
After the kill the server is restarted clean and each session's story is
checked against what survived:

- every acknowledged message is found exactly once by keyword search
  (whether it is still in history.json or only in the archive), unless a
  Reset or RemoveSession after it took it away;
- an acknowledged Reset or RemoveSession took away everything before it; one
  the kill interrupted did it in full or not at all: the messages before it
  are all there or all gone, never some;
- ids increase, history.json is a valid JSON array, no intent record is left.

With `--tenants` the server has a tenants file and two tenants use every
session id at once, each through its own write token: each acknowledged
message must also be present in its own tenant and absent from the other's
session of the same id.

    .venv/bin/python -m tests.reliability.crashloop --iterations 100 --seed 7     (make test-crash)
    .venv/bin/python -m tests.reliability.crashloop --iterations 100 --seed 7 --tenants
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

import msgspec

from memsvc.core.layout import DEFAULT_TENANT, Layout
from memsvc_client import Client, MemsvcError
from tests.support import ServerProcess
from tests.support.tenancy import write_tenants

KILL_POINTS = {
    # name: the highest hit to kill at (a point hit less often in an iteration gets a lower one)
    # An Append: its line written into history.json unsynced, then its journal frame made durable.
    "history.write": 40, "journal.write": 40, "journal.synced": 40,
    "durable.atomic_write.synced": 12, "durable.atomic_write.renamed": 12,
    "archive.commit": 40, "lifecycle.compact.flushed": 3,
    "lifecycle.clear.intended": 3, "archive.cleared": 3, "lifecycle.clear.derived": 3,
}
SESSIONS = ("alpha", "beta", "gamma")
SERVER_FLAGS = ("--max-history-bytes", "6000", "--max-message-bytes", "4000", "--max-history-messages", "4",
                "--archive-commit-seconds", "0.02")
COMPACT, SEARCH, RESET, REMOVE = 0.1, 0.1, 0.04, 0.03
"How often a client follows an Append with each of these."
TENANTS = ("red", "blue")
"With --tenants: two tenants that share every session id."
UNTENANTED = ("",)
Key = tuple[str, str]
"(tenant, session id) of a story; tenant '' on a server without a tenants file."


def token_of(tenant: str) -> str | None:
    """The write token a tenant's clients present (None: a server without tokens)."""
    return f"crashloop-{tenant}-write" if tenant else None


def server_args(data_dir: Path, tenants: tuple[str, ...]) -> list[str]:
    """The server's flags: a tenants file beside the data directory naming each tenant's write token."""
    if tenants == UNTENANTED:
        return list(SERVER_FLAGS)
    path = data_dir.parent / "tenants.toml"
    write_tenants(path, [(token, tenant, "write") for tenant in tenants if (token := token_of(tenant))])
    return [*SERVER_FLAGS, "--tenants-file", str(path)]


def sessions_dir(data_dir: Path, tenant: str) -> Path:
    return Layout(data_dir).tenant(tenant or DEFAULT_TENANT).sessions_dir


def named(key: Key) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


class Clear(msgspec.Struct):
    """A Reset or RemoveSession, in the order it came among a session's Appends."""

    removes: bool
    acknowledged: bool


class Story(msgspec.Struct):
    """What one session's client did, in order: acknowledged Appends (tokens) between clears."""

    segments: list[list[str]] = msgspec.field(default_factory=lambda: [[]])
    "segments[k] holds the tokens acknowledged after clears[k - 1] and before clears[k]."
    clears: list[Clear] = []
    ids: list[list[int]] = msgspec.field(default_factory=lambda: [[]])
    "The acknowledged ids, per run of the session between removals (a removed session starts again at 1)."

    def cleared(self, removes: bool, acknowledged: bool) -> None:
        self.clears.append(Clear(removes, acknowledged))
        self.segments.append([])
        if removes:
            self.ids.append([])


class Findings(msgspec.Struct):
    iterations: int = 0
    acknowledged: int = 0
    verified: int = 0
    isolated: int = 0
    "Acknowledged messages looked for, and not found, in the other tenant's session of the same id."
    kills: dict[str, int] = {}
    clears: dict[str, int] = {}
    "Resets and removals: acknowledged, interrupted and then found done, interrupted and found not done."
    problems: list[str] = []


def _work(server: ServerProcess, key: Key, label: str, story: Story, stop: threading.Event,
          rng: random.Random) -> None:
    tenant, session_id = key
    with server.client(timeout=5, token=token_of(tenant)) as client:
        sequence = 0
        while not stop.is_set():
            token = f"{label}n{sequence}w"
            try:
                reply = client.append(session_id, [("user", f"question {token} " + "pad " * rng.randint(0, 60)),
                                                   ("assistant", "answer")])
            except MemsvcError:
                return  # the server died under us: whatever was not acknowledged may be lost
            story.segments[-1].append(token)
            story.ids[-1].extend(message.id for message in reply.messages)
            sequence += 1
            roll = rng.random()
            try:
                if roll < COMPACT:
                    client.compact(session_id)
                elif roll < COMPACT + SEARCH:
                    client.search(session_id, token, match="keyword")
                elif roll < COMPACT + SEARCH + RESET + REMOVE:
                    removes = roll >= COMPACT + SEARCH + RESET
                    try:
                        if removes:
                            client.remove_session(session_id)
                        else:
                            client.reset(session_id, rng.choice(["summary", "all"]))
                    except MemsvcError:
                        story.cleared(removes, acknowledged=False)  # done or not: the kill decides
                        return
                    story.cleared(removes, acknowledged=True)
            except MemsvcError:
                return


def iteration(number: int, data_dir: Path, rng: random.Random, findings: Findings,
              stories: dict[Key, Story], flags: list[str]) -> None:
    point = rng.choice([*KILL_POINTS, "external"])
    env = {} if point == "external" else {"MEMSVC_FAILPOINTS": f"{point}=kill@{rng.randint(1, KILL_POINTS[point])}"}
    server = ServerProcess(data_dir, *flags, env=env)
    findings.iterations += 1
    try:
        server.start()
    except RuntimeError:
        assert server.process is not None and server.process.returncode == -9, "".join(server.log_lines)
        # Killed while completing, before serving, a Reset or removal the last kill interrupted.
        findings.kills[f"{point} (while starting)"] = findings.kills.get(f"{point} (while starting)", 0) + 1
        return
    stop = threading.Event()
    workers = [threading.Thread(target=_work, args=(server, key, f"i{number}{key[0][:1]}{key[1][0]}", story, stop,
                                                    random.Random(rng.random())))
               for key, story in stories.items()]
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


def _present(counts: list[int], session_id: str, findings: Findings) -> bool | None:
    """True if every token of a segment was found once, False if none was; None when it is empty, or
    (a problem) when some were found and some not, or one twice."""
    if not counts:
        return None
    if all(count == 1 for count in counts):
        return True
    if not any(counts):
        return False
    findings.problems.append(f"{session_id}: a segment's messages found {counts} times: some kept, some lost "
                             "or doubled")
    return None


def check_story(session_id: str, story: Story, counts: list[list[int]], findings: Findings) -> None:
    """Judge what survived (counts[k]: how often each token of segment k was found) against the story."""
    presence = [_present(segment, session_id, findings) for segment in counts]
    if presence[-1] is False:
        findings.problems.append(f"{session_id}: messages acknowledged after the last Reset/Remove are gone")
    for index, clear in enumerate(story.clears):
        before = presence[index]
        kind = ("acknowledged" if clear.acknowledged else "interrupted, what came before it gone"
                if before is False else "interrupted, what came before it kept")
        findings.clears[kind] = findings.clears.get(kind, 0) + 1
        if clear.acknowledged and before:
            findings.problems.append(f"{session_id}: an acknowledged Reset/Remove left what came before it")
        if before is False and True in presence[:index]:
            findings.problems.append(f"{session_id}: messages before gone ones survived a Reset/Remove")
    for run in story.ids:
        if run != sorted(set(run)):
            findings.problems.append(f"{session_id}: acknowledged ids did not keep increasing: {run[:20]}...")


def found(client: Client, session_id: str, token: str) -> int:
    """How many messages of the session hold `token` as a word."""
    hits = client.search(session_id, token, match="keyword", limit=32).hits
    return sum(token in hit.message.content.split() for hit in hits)


def verify(data_dir: Path, stories: dict[Key, Story], findings: Findings, flags: list[str]) -> None:
    server = ServerProcess(data_dir, *flags).start()
    tenants = sorted({tenant for tenant, _ in stories})
    clients = {tenant: server.client(timeout=30, token=token_of(tenant)) for tenant in tenants}
    try:
        for (tenant, session_id), story in stories.items():
            client, name = clients[tenant], named((tenant, session_id))
            history = sessions_dir(data_dir, tenant) / session_id / "history.json"
            if history.exists():
                msgspec.json.decode(history.read_bytes())  # a valid JSON array, or this raises
            ids = [m.id for m in client.get_context(session_id).window]
            if ids != sorted(set(ids)):
                findings.problems.append(f"{name}: window ids not increasing: {ids}")
            counts = []
            for segment in story.segments:
                counts.append([])
                for token in segment:
                    counts[-1].append(found(client, session_id, token))
                    findings.verified += 1
                    for other in tenants:
                        if other != tenant:
                            findings.isolated += 1
                            if found(clients[other], session_id, token):
                                findings.problems.append(f"{name}: {token} found in tenant {other}'s {session_id}")
            check_story(name, story, counts, findings)
        for tenant in tenants:
            leftovers = sorted(path.name for path in sessions_dir(data_dir, tenant).glob(".intent-*"))
            if leftovers:
                findings.problems.append(f"intent records left after start: {leftovers}")
    finally:
        for client in clients.values():
            client.close()
        server.terminate()


def run(iterations: int, seed: int, data_dir: Path, tenants: bool = False) -> Findings:
    """`tenants`: two tenants share every session id, on a server with a tenants file."""
    rng = random.Random(seed)
    findings = Findings()
    names = TENANTS if tenants else UNTENANTED
    stories = {(tenant, session_id): Story() for tenant in names for session_id in SESSIONS}
    data_dir.mkdir(parents=True, exist_ok=True)
    flags = server_args(data_dir, names)
    for number in range(iterations):
        iteration(number, data_dir, rng, findings, stories, flags)
    findings.acknowledged = sum(len(segment) for story in stories.values() for segment in story.segments)
    verify(data_dir, stories, findings, flags)
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--tenants", action="store_true", help="two tenants sharing every session id")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        findings = run(args.iterations, args.seed, Path(tmp) / "data", tenants=args.tenants)
    print(f"{findings.iterations} kill iterations (seed {args.seed}) in {time.monotonic() - started:.0f} s")
    print(f"kills by point: {dict(sorted(findings.kills.items()))}")
    print(f"resets and removals: {dict(sorted(findings.clears.items()))}")
    print(f"acknowledged messages: {findings.acknowledged}; checked against their session's story: "
          f"{findings.verified}" + (f"; absent from the other tenant: {findings.isolated}" if args.tenants else ""))
    print(f"findings: {len(findings.problems)}")
    for problem in findings.problems[:50]:
        print(f"  {problem}")
    raise SystemExit(1 if findings.problems else 0)


if __name__ == "__main__":
    main()
