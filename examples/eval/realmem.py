"""One RealMem persona as `memsvc eval` files: its conversation and its labelled questions.

    .venv/bin/python examples/eval/realmem.py Kenta_Tanaka /tmp/kenta   [--data ../shared/data/realmem]
    memsvc eval --target HOST:PORT kenta /tmp/kenta/questions.jsonl --load /tmp/kenta/conversation.jsonl

The persona's turns (but empty ones) become messages 1, 2, 3... in time order, with their times
(benchmarks/realmem.py reads them); each query becomes a question whose answers are its evidence items (an
item is found when any of its turns is), asked with `until_unix_nano` = the query's own time, so only earlier
turns can be found, as `make bench-retrieval` asks them. The data stays outside the repository: this writes to
the directory given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import realmem  # noqa: E402  (benchmarks/ is a directory of scripts, not a package)


def write(persona: realmem.Persona, directory: Path) -> tuple[int, int]:
    """The files; (messages, questions) written. Empty turns cannot be stored: they are left out, and so are
    evidence items and questions left with nothing to find."""
    directory.mkdir(parents=True, exist_ok=True)
    stored = [position for position, turn in enumerate(persona.turns) if turn.content.strip()]
    ids = {position: id_ for id_, position in enumerate(stored, start=1)}
    with (directory / "conversation.jsonl").open("w", encoding="utf-8") as conversation:
        for position in stored:
            turn = persona.turns[position]
            conversation.write(json.dumps({"role": turn.role, "content": turn.content,
                                           "send_at_unix_nano": turn.send_at}, ensure_ascii=False) + "\n")
    asked = 0
    with (directory / "questions.jsonl").open("w", encoding="utf-8") as questions:
        for case in persona.queries:
            answers = [found for item in case.gold if (found := sorted(ids[p] for p in item.positions if p in ids))]
            if not answers:
                continue
            questions.write(json.dumps({"question": case.text, "answers": answers,
                                        "until_unix_nano": persona.turns[case.position].send_at},
                                       ensure_ascii=False) + "\n")
            asked += 1
    return len(stored), asked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("persona", help="e.g. Kenta_Tanaka (a *_dialogues_256k.json file of --data)")
    parser.add_argument("directory", type=Path, help="where conversation.jsonl and questions.jsonl are written")
    parser.add_argument("--data", type=Path, default=realmem.DEFAULT_DATA)
    args = parser.parse_args()
    personas = realmem.load(args.data, [args.persona])
    if not personas:
        print(f"no persona {args.persona!r} in {args.data}", file=sys.stderr)
        return 2
    turns, questions = write(personas[0], args.directory)
    print(f"{args.directory}: {turns} messages, {questions} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
