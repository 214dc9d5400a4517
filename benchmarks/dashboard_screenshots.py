"""Screenshots of the dashboard's plots with real data: benchmarks/results/dashboard/{overview,session}.png.

Starts a real server (HTTP listener on, a scripted summary model on loopback), talks to it for
`--minutes` the way a few agents would: the chatterbot corpus's dialogues (benchmarks/data) appended
turn by turn to a handful of sessions, searches in each mode (keyword first, then semantic, then
hybrid, with overlaps, so each kind's line has its own shape), error-memory lookups, one Compact and one
Summarize half-way. Then Debian's Chromium (tests/support/browser.py) opens the overview and the busiest
session and saves both pages whole.

    .venv/bin/python benchmarks/dashboard_screenshots.py --minutes 5
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from pathlib import Path

from common import ServerProcess  # first: puts the repository on sys.path for tests.support
from playwright.sync_api import expect, sync_playwright

from memsvc_client import MemsvcError
from tests.support.browser import CHROMIUM, FLAGS
from tests.support.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "dashboard"
DIALOGUES = json.loads((ROOT / "benchmarks/data/conversations.json").read_text())["dialogues"]
SESSIONS = ["support-desk", "travel-planner", "code-review", "research-notes", "daily-standup"]
SUMMARY = {"key_decisions": ["Do: answer in short paragraphs", "Don't: guess prices"],
           "past_discussions": [{"topic": "greetings", "description": "small talk", "direction": "settled",
                                 "last_discussed": "2026-12-02 09:00"}],
           "current_discussion": {"topic": "computers", "description": "what a computer does",
                                  "perspectives": "user curious", "direction": "examples"}}
LESSONS = [("web_fetch", "HTTP 403 Forbidden from cloudflare", "send a browser User-Agent"),
           ("shell", "permission denied: ./deploy.sh", "chmod +x deploy.sh before running it")]


def talk(server: ServerProcess, llm: LLMServer, minutes: float, seed: int) -> None:
    rng = random.Random(seed)
    lines = [line for dialogue in DIALOGUES for line in dialogue["lines"]]
    started, compacted, summarized = time.monotonic(), False, False
    with server.client() as client:
        for tool, symptom, action in LESSONS:
            client.record_error(tool, symptom, action)
        turn = 0
        while (elapsed := time.monotonic() - started) < minutes * 60:
            phase = elapsed / (minutes * 60)
            # Load rises and falls twice over the run: calls per second between ~2 and ~20.
            pause = 1 / (2 + 18 * math.sin(math.pi * 2 * phase) ** 2)
            session = SESSIONS[min(len(SESSIONS) - 1, int(rng.expovariate(1.2)))]
            client.append(session, [("user", lines[turn % len(lines)]), ("assistant", lines[(turn + 1) % len(lines)])])
            query = rng.choice(lines).split(" ")[:3]
            modes = ["keyword"] + (["semantic"] if phase > 0.25 else []) + (["hybrid"] if phase > 0.5 else [])
            client.search(session, " ".join(query), match=rng.choice(modes))
            if rng.random() < 0.1:
                tool, symptom, _ = rng.choice(LESSONS)
                client.lookup_errors(tool, symptom)
            if phase > 0.5 and not summarized:
                # One reply per chunk of the run (a chunk is at most a few hundred messages).
                llm.script("sum", *[f"<summary>{json.dumps(SUMMARY)}</summary>"] * 50)
                client.summarize(SESSIONS[0])
                summarized = True
            if phase > 0.5 and not compacted:
                try:
                    client.compact(SESSIONS[0])
                    compacted = True
                except MemsvcError:  # ARCHIVE_BEHIND: the archive has not indexed them yet; next turn
                    pass
            turn += 2
            time.sleep(pause)
        client.append(SESSIONS[0], [("user", "one more question after the summary")])


def shoot(server: ServerProcess, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(f"http://{server.http}/#/overview")
        expect(page.locator("figure.chart canvas")).to_have_count(7)
        page.screenshot(path=out / "overview.png", full_page=True)
        page.goto(f"http://{server.http}/#/sessions/{SESSIONS[0]}")
        expect(page.locator("figure.chart canvas")).to_have_count(1)
        expect(page.locator(".summary-cursor")).to_contain_text("after the cursor")
        expect(page.locator(".summary-cursor")).to_contain_text("last run")
        page.screenshot(path=out / "session.png")  # the plots above the tabs; the window's messages run on
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    llm = LLMServer().start()
    with tempfile.TemporaryDirectory() as scratch:
        server = ServerProcess(Path(scratch) / "data", "--http-listen", "127.0.0.1:0", "--llm-base-url", llm.base_url,
                               "--summary-model", "sum", "--llm-max-retries", "0",
                               "--max-history-messages", "40").start()
        try:
            talk(server, llm, args.minutes, args.seed)
            shoot(server, args.out)
        finally:
            server.terminate()
            llm.stop()
    print(f"wrote {args.out / 'overview.png'} and {args.out / 'session.png'}")


if __name__ == "__main__":
    main()
