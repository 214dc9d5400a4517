"""The archive's one-time move to index format 2 at start, against opening the moved index again.

An archive written before payloads (`index/`, format 1) is copied into `index-v2/` document by
document before the server serves (memsvc/archive/reindex.py). This builds a format-1 index of
`--messages` messages in 100 sessions with the schema of that time, times the first start (the
move) and a second start over the moved index, side by side, and writes
benchmarks/results/archive_format.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import RESULTS

from memsvc.archive.index import Archive
from tests.support.old_data import format_1

SESSIONS = 100


def opened(store: Path) -> float:
    started = time.perf_counter()
    archive = Archive(store, commit_interval=0.05)
    seconds = time.perf_counter() - started
    archive.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / ".store"
        format_1(store, {f"s{n}": args.messages // SESSIONS for n in range(SESSIONS)},
                 text="archived note {n} about the deploy pipeline and the sandbox")
        move = opened(store)
        again = opened(store)
    result = {"messages": args.messages, "first_start_with_move_s": round(move, 2),
              "second_start_s": round(again, 3), "messages_per_s": round(args.messages / move),
              "move_over_second_start": round(move / again, 1)}
    print(json.dumps(result, indent=2))
    (RESULTS / "archive_format.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
