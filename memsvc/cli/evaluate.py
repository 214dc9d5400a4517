"""`memsvc eval`: how well a running server finds, on the user's own conversation and questions.

It asks every question of one session in every match mode (keyword, semantic, hybrid), ranks each reply's
matches by score (context messages are not matches), and prints per mode recall@k (the share of a question's
answers among its best k matches, averaged over questions), MRR (1 / the place of the first answer found, 0
when none is) and the latency of the calls as this client saw them; `--report FILE` writes it all, per
question too, as JSON. `--load FILE` first appends a conversation (JSON Lines of messages) to a session that
holds none, so its lines become messages 1, 2, 3...

The questions file is JSON Lines, one object a line: `question` (the text searched) and `answers` (the ids
of the messages that answer it; an entry may be a list of ids any one of which counts), optionally
`until_unix_nano` (search only messages sent before it). Owns these two file formats, the metrics and the
report; must never open a data directory: every call goes through the server. A reranker is the server's
setting: hybrid here is hybrid as the server runs it, reranked when it is configured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memsvc.cli.connection import add_connection_arguments, client_arguments
from memsvc.cli.render import table

MODES = ("keyword", "semantic", "hybrid")
APPEND_BATCH = 100
"Messages per Append of --load: well within max_request_bytes for conversational messages."


@dataclass
class Question:
    text: str
    answers: list[frozenset[int]]
    "Each answer: the ids any one of which counts."
    until_unix_nano: int = 0


@dataclass
class Asked:
    question: str
    found_ids: list[int]
    "The matches, best first, at most k."
    recall: float
    reciprocal_rank: float
    milliseconds: float


@dataclass
class ModeReport:
    mode: str
    recall_at_k: float
    mrr: float
    latency_ms_p50: float
    latency_ms_p95: float
    questions: list[Asked] = field(default_factory=list)


class BadFile(ValueError):
    """A conversation or questions file this command cannot read: names the file and line."""


def read_questions(path: Path) -> list[Question]:
    questions = []
    for number, item in _lines(path):
        text, answers = item.get("question"), item.get("answers")
        if not isinstance(text, str) or not text.strip() or not isinstance(answers, list) or not answers:
            raise BadFile(f"{path}:{number}: a question needs `question` (text) and `answers` (message ids)")
        try:
            alternatives = [frozenset(answer if isinstance(answer, list) else [answer]) for answer in answers]
        except TypeError:
            raise BadFile(f"{path}:{number}: each answer is a message id or a list of them") from None
        if not all(alternative and all(_is_id(id_) for id_ in alternative) for alternative in alternatives):
            raise BadFile(f"{path}:{number}: each answer is a message id or a list of them")
        questions.append(Question(text, alternatives, int(item.get("until_unix_nano", 0))))
    if not questions:
        raise BadFile(f"{path} holds no questions")
    return questions


def read_conversation(path: Path) -> list[dict[str, Any]]:
    messages = []
    for number, item in _lines(path):
        if item.get("role") not in ("user", "assistant") or not isinstance(item.get("content"), str):
            raise BadFile(f"{path}:{number}: a message needs `role` (user or assistant) and `content`")
        message: dict[str, Any] = {key: item[key] for key in ("role", "content", "sender", "send_at_unix_nano")
                                   if key in item}
        messages.append(message)
    return messages


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadFile(f"{path}:{number}: not JSON: {error.msg}") from None
        if not isinstance(item, dict):
            raise BadFile(f"{path}:{number}: each line is a JSON object")
        items.append((number, item))
    return items


def scored(question: Question, found: list[int]) -> tuple[float, float]:
    """(recall: the share of answers among `found`, reciprocal rank of the first match that is an answer)."""
    recall = sum(1 for answer in question.answers if answer.intersection(found)) / len(question.answers)
    answering = set().union(*question.answers)
    first = next((place for place, id_ in enumerate(found, start=1) if id_ in answering), 0)
    return recall, 1 / first if first else 0.0


def ask(memory: Any, session: str, question: Question, mode: str, k: int) -> Asked:
    started = time.perf_counter()
    reply = memory.search(session, question.text, match=mode, limit=k, include_window=True,
                          until_unix_nano=question.until_unix_nano or None)
    milliseconds = (time.perf_counter() - started) * 1000
    matches = sorted((hit for hit in reply.hits if not hit.is_context), key=lambda hit: -hit.score)
    found = [hit.message.id for hit in matches][:k]
    recall, reciprocal_rank = scored(question, found)
    return Asked(question.text, found, recall, reciprocal_rank, round(milliseconds, 3))


def evaluate(memory: Any, session: str, questions: list[Question], modes: list[str], k: int) -> list[ModeReport]:
    reports = []
    for mode in modes:
        asked = [ask(memory, session, question, mode, k) for question in questions]
        latencies = sorted(item.milliseconds for item in asked)
        reports.append(ModeReport(mode, statistics.fmean(item.recall for item in asked),
                                  statistics.fmean(item.reciprocal_rank for item in asked),
                                  statistics.median(latencies), latencies[min(len(latencies) - 1,
                                                                               int(0.95 * len(latencies)))],
                                  asked))
    return reports


def load(memory: Any, session: str, conversation: list[dict[str, Any]]) -> None:
    """Append the conversation to a session holding no messages, so its lines become ids 1, 2, 3..."""
    if memory.list_messages(session, page_size=1).messages:
        raise BadFile(f"session {session!r} already holds messages: --load needs a new session (its lines "
                      "become messages 1, 2, 3...)")
    for start in range(0, len(conversation), APPEND_BATCH):
        memory.append(session, conversation[start:start + APPEND_BATCH])


def settle(memory: Any, session: str, patience_seconds: float) -> int:
    """Wait until the server has embedded every message of the session (a semantic search counts those it could
    not search in `unsearched`), so that no question is asked of a half-indexed session; returns how many are
    still pending when patience runs out."""
    deadline = time.monotonic() + patience_seconds
    while True:
        pending = memory.search(session, "settle", include_window=True, limit=1).unsearched
        if not pending or time.monotonic() > deadline:
            return int(pending)
        print(f"waiting for {pending} messages to be embedded", file=sys.stderr)
        time.sleep(1)


def run(args: argparse.Namespace) -> int:
    from memsvc_client import Client, MemsvcError

    try:
        questions = read_questions(args.questions)
        conversation = read_conversation(args.load) if args.load else None
        with Client(args.target, **client_arguments(args)) as memory:
            if conversation is not None:
                load(memory, args.session, conversation)
            if pending := settle(memory, args.session, args.settle_seconds):
                print(f"memsvc: {pending} messages are still not embedded after {args.settle_seconds:g} s: "
                      "semantic and hybrid figures leave them out", file=sys.stderr)
            reports = evaluate(memory, args.session, questions, args.mode or list(MODES), args.k)
    except MemsvcError as error:
        print(f"memsvc: {error}", file=sys.stderr)
        return 1
    except (OSError, BadFile) as error:
        print(f"memsvc: {error}", file=sys.stderr)
        return 2
    table(["MODE", "QUESTIONS", f"RECALL@{args.k}", "MRR", "P50 MS", "P95 MS"],
          ([report.mode, len(questions), f"{report.recall_at_k:.3f}", f"{report.mrr:.3f}",
            f"{report.latency_ms_p50:.1f}", f"{report.latency_ms_p95:.1f}"] for report in reports), "no modes")
    if args.report:
        document = {"session": args.session, "target": args.target, "k": args.k, "questions": len(questions),
                    "modes": [asdict(report) for report in reports]}
        args.report.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"report written to {args.report}", file=sys.stderr)
    return 0


def _k(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 32:
        raise argparse.ArgumentTypeError("k is between 1 and 32 (Search's largest limit)")
    return value


def add_command(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "eval", help="measure recall@k, MRR and latency of each search mode on your own questions",
        description="Ask every question of QUESTIONS of SESSION in each match mode on a running server and print, per "
                    "mode, recall@k (the share of a question's answers among its best k matches), MRR and the "
                    "calls' latency. Context messages are not matches; the window is searched too.")
    add_connection_arguments(parser)
    parser.add_argument("session", metavar="SESSION", help="the session the questions are about")
    parser.add_argument("questions", metavar="QUESTIONS", type=Path,
                        help="JSON Lines: {\"question\": TEXT, \"answers\": [ID or [ID, ...], ...]} a line")
    parser.add_argument("--load", type=Path, metavar="CONVERSATION",
                        help="first append this conversation (JSON Lines of {\"role\", \"content\"}) to SESSION, "
                             "which must hold no messages")
    parser.add_argument("-k", type=_k, default=8, help="how many matches count (default 8, at most 32)")
    parser.add_argument("--mode", action="append", choices=MODES,
                        help="only this mode (repeatable; default: every mode)")
    parser.add_argument("--settle-seconds", type=float, default=600,
                        help="how long to wait for the server to embed the session's messages before asking "
                             "(default 600)")
    parser.add_argument("--report", type=Path, metavar="FILE", help="write the results, per question too, as JSON")
    parser.set_defaults(main=run)
