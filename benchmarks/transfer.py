"""Export and import of one long session between two real servers, through the Python client:
how long each takes beside appending the same messages in the same run, and how much each
server's resident memory grows meanwhile (the stream is paged, so it should not grow with the
session), beside the session's size and beside the growth of the server the session was appended
to (both index every message in the archive). Every fifth message is a tool result with a payload, as an
agent's session holds them; the session is compacted first, so most of it comes from the archive.

    .venv/bin/python benchmarks/transfer.py [--messages 100000] [--size 300]

Writes benchmarks/results/transfer.json.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from common import ServerProcess, save

from memsvc_client import Client
from tests.support import rss_mib

BATCH = 1000
"Messages per Append while the session is filled (max_messages_per_request's default)."


class Peak:
    """The highest resident memory of a server while the block runs, sampled every 10 ms."""

    def __init__(self, server: ServerProcess):
        assert server.process is not None
        self.pid, self.peak, self.stop = server.process.pid, 0.0, threading.Event()

    def __enter__(self) -> Peak:
        self.before = rss_mib(self.pid)
        self.thread = threading.Thread(target=self._sample)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.stop.wait(0.01):
            self.peak = max(self.peak, rss_mib(self.pid))

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    @property
    def growth_mib(self) -> float:
        return round(max(0.0, self.peak - self.before), 1)


def message(number: int, size: int) -> dict[str, str]:
    text = f"{number} " + "z" * size
    if number % 5 == 4:
        return {"role": "tool", "content": text, "payload_json": f'{{"tool_call_id": "c{number}"}}'}
    return {"role": "user" if number % 2 == 0 else "assistant", "content": text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=300, help="characters per message")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = ServerProcess(Path(tmp) / "source").start()
        target = ServerProcess(Path(tmp) / "target").start()
        try:
            with Client(source.tcp, timeout=600) as one, Client(target.tcp, timeout=600) as two:
                with Peak(source) as filling:
                    started = time.perf_counter()
                    for first in range(0, args.messages, BATCH):
                        one.append("long", [message(n, args.size)
                                            for n in range(first, min(first + BATCH, args.messages))])
                    appended = time.perf_counter() - started
                one.compact("long")
                with Peak(source) as exporting:
                    started = time.perf_counter()
                    stream = one.export_session("long")
                    head = next(stream).head
                    parts = 1 + sum(1 for _ in stream)
                    exported = time.perf_counter() - started
                with Peak(source) as piping_out, Peak(target) as importing:
                    started = time.perf_counter()
                    imported = two.import_session(one.export_session("long"))
                    moved = time.perf_counter() - started
                assert imported.messages == args.messages
                assert len(two.list_messages("long", page_size=1000).messages) == 1000
        finally:
            source.terminate()
            target.terminate()
    result = {
        "messages": args.messages, "characters_per_message": args.size,
        "archived_only": head.first_recent_id - 1, "in_history_json": head.recent_messages,
        "content_mib": round(args.messages * args.size / 2**20, 1),
        "append_seconds": round(appended, 2), "export_seconds": round(exported, 2), "export_parts": parts,
        "export_then_import_seconds": round(moved, 2),
        "messages_per_second": {"append": round(args.messages / appended), "export": round(args.messages / exported),
                                "export_then_import": round(args.messages / moved)},
        "export_over_append": round(exported / appended, 2),
        "export_then_import_over_append": round(moved / appended, 2),
        "rss_growth_mib": {"appended_server_while_filled": filling.growth_mib,
                           "exporting_server": exporting.growth_mib,
                           "exporting_server_while_piped": piping_out.growth_mib,
                           "importing_server": importing.growth_mib},
    }
    result["importing_over_appending_rss_growth"] = round(importing.growth_mib / max(filling.growth_mib, 0.1), 2)
    save("transfer", result)
    print(result)


if __name__ == "__main__":
    main()
