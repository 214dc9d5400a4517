"""The archive's one-time move to the current index version at start, against opening the moved index again.

An archive of the first releases (`index/`, version 1) is copied into `index-v4/` document by
document, analyzed anew, before the server serves (memsvc/archive/reindex.py). This builds a
version-1 index of `--messages` messages in 100 sessions with the schema and analyzer of that time,
times the first start (the move) and a second start over the moved index, side by side, and writes
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
from tests.support.archives import numbered, old_index

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
        messages = numbered(args.messages // SESSIONS, "archived note {n} about the deploy pipeline and the sandbox")
        old_index(store, 1, {f"s{n}": messages for n in range(SESSIONS)})
        move = opened(store)
        again = opened(store)
    result = {"messages": args.messages, "first_start_with_move_s": round(move, 2),
              "second_start_s": round(again, 3), "messages_per_s": round(args.messages / move),
              "move_over_second_start": round(move / again, 1)}
    print(json.dumps(result, indent=2))
    (RESULTS / "archive_format.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
