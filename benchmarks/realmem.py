"""RealMem (zhiyuan5986/RealMemBench, Apache-2.0) read as memsvc sees a conversation, and its metric.

Each persona is one memsvc session: its sessions' turns in time order, the
role from `speaker`, the content as it is, the time from the session's
`current_time` (a second apart within a session). A query is a User turn with
`is_query`; it may search only the turns before it. Its gold: one item per
`memory_used` entry of the Assistant turn after it, mapped through the
`extracted_memory` entry of that session with the same content to the turns
whose content equals its `source_content_snapshot` (when none does, any turn
of that session counts). `extracted_memory` and `memory_used` hold the
answers and are never indexed.

Evidence recall@k: the share of a query's gold items with a turn among the
messages returned (with expansion: the hits and their 2-before/1-after
neighbours), averaged over queries.

The data is never copied into the repository: it is read from --data
(default ../shared/data/realmem beside the repository).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "realmem"
BEFORE, AFTER = 2, 1


class Turn(msgspec.Struct, frozen=True):
    key: str
    "f'{session_uuid}:{index}'"
    role: str
    content: str
    send_at: int
    session: str


class Gold(msgspec.Struct, frozen=True):
    """One evidence item: found when any of its turns (positions in the persona) is returned."""

    positions: frozenset[int]


class QueryCase(msgspec.Struct, frozen=True):
    persona: str
    position: int
    "The query turn's position: only turns before it may be searched."
    text: str
    gold: list[Gold]


class Persona(msgspec.Struct):
    name: str
    turns: list[Turn]
    queries: list[QueryCase]


def _flag(value: object) -> bool:
    return value is True or str(value).lower() == "true"


def load(data: Path, names: Iterable[str] | None = None) -> list[Persona]:
    files = sorted(data.glob("*_dialogues_256k.json"))
    if not files:
        raise SystemExit(f"no RealMem files in {data}: pass --data (see benchmarks/realmem.py)")
    wanted = set(names or [])
    return [_persona(path) for path in files if not wanted or _name(path) in wanted]


def _name(path: Path) -> str:
    return path.name.removesuffix("_dialogues_256k.json")


def _persona(path: Path) -> Persona:
    dialogues = json.loads(path.read_text())["dialogues"]
    turns: list[Turn] = []
    by_session: dict[str, list[int]] = {}
    by_content: dict[tuple[str, str], list[int]] = {}
    pending: list[tuple[int, str, dict]] = []
    clock = 0
    for session in dialogues:
        uuid = session["session_uuid"]
        day = int(datetime.strptime(session["current_time"][:10], "%Y-%m-%d").timestamp()) * 10**9
        clock = max(clock + 10**9, day)  # sessions of one day follow each other: time never goes back
        for index, turn in enumerate(session["dialogue_turns"]):
            position = len(turns)
            clock += 10**9
            turns.append(Turn(f"{uuid}:{index}", "user" if turn["speaker"] == "User" else "assistant",
                              turn["content"], clock, uuid))
            by_session.setdefault(uuid, []).append(position)
            by_content.setdefault((uuid, turn["content"]), []).append(position)
            if _flag(turn.get("is_query")):
                pending.append((position, turn["content"], session))
    memories = {(memory["session_uuid"], _text(memory["content"])): memory
                for session in dialogues for memory in session.get("extracted_memory", [])}
    queries = []
    for position, text, session in pending:
        answer = turns[position + 1] if position + 1 < len(turns) else None
        raw = _assistant_after(session, turns[position].key)
        if answer is None or raw is None:
            continue
        gold = []
        for used in raw.get("memory_used", []):
            memory = memories.get((used["session_uuid"], _text(used["content"])))
            exact = by_content.get((used["session_uuid"], memory["source_content_snapshot"])) if memory else None
            candidates = [p for p in (exact or by_session.get(used["session_uuid"], [])) if p < position]
            if candidates:
                gold.append(Gold(frozenset(candidates)))
        if gold:
            queries.append(QueryCase(_name(path), position, text, gold))
    return Persona(_name(path), turns, queries)


def _text(value: object) -> str:
    """One memory's content is a JSON object instead of a string: compare it as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _assistant_after(session: dict, key: str) -> dict | None:
    index = int(key.rsplit(":", 1)[1])
    following = session["dialogue_turns"][index + 1:index + 2]
    return following[0] if following and following[0]["speaker"] == "Assistant" else None


def expanded(positions: Iterable[int], before: int) -> set[int]:
    """Hits with their 2-before/1-after neighbours, among the turns before `before`."""
    return {near for hit in positions for near in range(max(0, hit - BEFORE), min(before, hit + AFTER + 1))}


def recall(case: QueryCase, returned: Iterable[int]) -> float:
    found = set(returned)
    return sum(1 for item in case.gold if item.positions & found) / len(case.gold)
