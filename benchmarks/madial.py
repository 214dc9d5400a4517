"""MADial-Bench (hejunqing/MADial-Bench, MIT) read as memsvc sees it, and its metric.

Each of the two users' memories (Bart, Lisa) is one memsvc session: the
`event` text of each memory as a user message, sent at the memory's `time`
(memories of one day a second apart, in id order). A query is the dialogue
before each `test-turn` (the assistant line where a memory should come up),
both speakers' lines, tags and quotes removed, one per line: what the agent
has in view when it looks for a memory (the user's last line alone gives
keyword 0.46 and builtin dense 0.39 recall@8 in English, the last three lines
0.63 and 0.51, the whole dialogue 0.67 and 0.50). Its gold: the dialogue's
`relevant-id` memories of that user.

Recall@k: the share of a query's gold memories among its first k hits,
averaged over queries. English and Chinese hold the same memories and
dialogues; the English memory file has no `user-id`, so it is read from the
Chinese one (same ids).

The data is never copied into the repository: it is read from --madial
(default ../shared/data/madial beside the repository).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "madial"
LANGUAGES = ("en", "zh")
SPEAKER = re.compile(r'^<[^>]*>:\s*"?(.*?)"?\s*$', re.S)


class Memory(msgspec.Struct, frozen=True):
    id: int
    content: str
    send_at: int


class Case(msgspec.Struct, frozen=True):
    user: str
    "The session: one per user."
    text: str
    gold: frozenset[int]
    "Memory ids."


class Half(msgspec.Struct):
    language: str
    sessions: dict[str, list[Memory]]
    "user -> memories in time order"
    cases: list[Case]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load(data: Path, language: str) -> Half:
    if not (data / language / "memory.jsonl").exists():
        raise SystemExit(f"no MADial files in {data}: pass --madial (see benchmarks/madial.py)")
    owners = {}
    for row in _lines(data / "zh" / "memory.jsonl"):
        for key, memory in row.items():
            owners[int(key)] = f"user-{memory['user-id']}"
    memories: dict[str, list[tuple[int, int, str]]] = {}
    for row in _lines(data / language / "memory.jsonl"):
        for key, memory in row.items():
            day = int(datetime.strptime(memory["time"][:10], "%Y-%m-%d").timestamp()) * 10**9
            memories.setdefault(owners[int(key)], []).append((day, int(key), memory["event"]))
    sessions = {}
    for user, rows in memories.items():
        rows.sort()
        sessions[user] = [Memory(id_, text, day + n * 10**9) for n, (day, id_, text) in enumerate(rows)]
    known = {memory.id for found in sessions.values() for memory in found}
    cases = []
    for dialogue in _lines(data / language / "dialogue.jsonl"):
        user = f"user-{dialogue['user-id']}"
        gold = frozenset(id_ for id_ in dialogue["relevant-id"] if id_ in known)
        for turn in dialogue["test-turn"]:
            said = [line for line in dialogue["dialogue"][:turn] if not line.startswith("<BOD>")]
            if gold and said:
                cases.append(Case(user, "\n".join(_spoken(line) for line in said), gold))
    return Half(language, sessions, cases)


def _spoken(line: str) -> str:
    found = SPEAKER.match(line.strip())
    return (found.group(1) if found else line).strip()


def recall(case: Case, returned: Iterable[int]) -> float:
    return len(case.gold & set(returned)) / len(case.gold)
