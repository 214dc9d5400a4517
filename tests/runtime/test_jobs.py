"""The cron scheduler, driven by an injected clock, and the summary job it runs."""

from __future__ import annotations

import logging
import os
import re
import threading
from datetime import UTC, datetime

import pytest

from memsvc.core.errors import InvalidSetting
from memsvc.core.layout import CURSOR
from memsvc.runtime.jobs import Scheduler
from memsvc.summary import rolling
from tests.support import World
from tests.support.llm_server import error, summary_reply

START = datetime(2025, 3, 1, 12, 3, 20, tzinfo=UTC)


class FakeClock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, hour: int, minute: int, second: int = 0) -> None:
        self.now = self.now.replace(hour=hour, minute=minute, second=second)


def run(scheduler: Scheduler) -> int:
    """One tick, waiting for the jobs it started; returns how many started."""
    started = scheduler.tick()
    for thread in started:
        thread.join()
    return len(started)


def test_jobs_run_at_their_cron_times_and_missed_times_run_once():
    clock = FakeClock(START)
    scheduler = Scheduler(clock=clock)
    runs = []
    job = scheduler.register("count", "*/15 * * * *", lambda: runs.append(clock()))
    assert job.next_at == START.replace(minute=15, second=0)
    clock.at(12, 14, 59)
    assert run(scheduler) == 0
    clock.at(12, 15)
    assert run(scheduler) == 1
    clock.at(12, 29, 59)
    assert run(scheduler) == 0
    clock.at(13, 7)  # slept through 12:30, 12:45 and 13:00
    assert run(scheduler) == 1 and run(scheduler) == 0
    assert job.next_at == START.replace(hour=13, minute=15, second=0)
    assert runs == [START.replace(minute=15, second=0), START.replace(hour=13, minute=7, second=0)]


def test_a_job_still_running_skips_its_next_time(caplog):
    clock = FakeClock(START)
    scheduler = Scheduler(clock=clock)
    release, calls = threading.Event(), []
    scheduler.register("slow", "*/15 * * * *", lambda: (calls.append(1), release.wait()))
    clock.at(12, 15)
    (first,) = scheduler.tick()
    clock.at(12, 30)
    assert scheduler.tick() == []
    assert "job still running, this time skipped" in caplog.text
    release.set()
    first.join()
    clock.at(12, 45)
    assert run(scheduler) == 1 and len(calls) == 2


def test_a_failing_job_is_logged_and_runs_again_next_time(caplog):
    clock = FakeClock(START)
    scheduler = Scheduler(clock=clock)
    calls = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    scheduler.register("broken", "*/15 * * * *", broken)
    caplog.set_level(logging.ERROR)
    clock.at(12, 15)
    run(scheduler)
    clock.at(12, 30)
    run(scheduler)
    assert len(calls) == 2 and caplog.text.count("job failed") == 2


def test_registering_is_one_call_and_bad_expressions_are_refused():
    scheduler = Scheduler(clock=FakeClock(START))
    with pytest.raises(InvalidSetting, match="not a cron expression"):
        scheduler.register("bad", "every 15 minutes", lambda: None)
    with pytest.raises(InvalidSetting):
        scheduler.register("bad", "61 * * * *", lambda: None)
    assert scheduler.jobs == []


def test_the_real_loop_runs_due_jobs_and_stops():
    scheduler = Scheduler()
    ran = threading.Event()
    scheduler.register("every-second", "* * * * * *", ran.set)
    scheduler.start()
    try:
        assert ran.wait(10)
    finally:
        scheduler.stop()
    assert not scheduler._loop.is_alive()


# -- the summary job -----------------------------------------------------------

SESSION_TAG = re.compile(r"\[session (\S+)\]")


def tagged_summary(request) -> str:
    return summary_reply(topic=SESSION_TAG.search(request.user).group(1))


def say(world: World, session_id: str) -> None:
    world.say(session_id, ("user", f"[session {session_id}] question"), ("assistant", "answer"))


def set_mtimes(world: World, session_id: str, history_ns: int, summary_ns: int | None, cursor: bool = True) -> None:
    """Give the session a summary (and a cursor before its messages) and set both mtimes."""
    directory = world.directory(session_id)
    os.utime(directory / "history.json", ns=(history_ns, history_ns))
    if summary_ns is not None:
        rolling.save(directory / "summary.json", rolling.Summary(current_discussion=rolling.CurrentDiscussion(
            topic=f"before {session_id}")))
        os.utime(directory / "summary.json", ns=(summary_ns, summary_ns))
        if cursor:
            (directory / CURSOR).write_text("2000-01-01 00:00:00\n")


def summarized(llm_server) -> list[str]:
    return [SESSION_TAG.search(call.user).group(1) for call in llm_server.calls("sum")]


def test_the_summary_job_picks_exactly_the_sessions_the_mtime_gate_selects(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url)
    base = 1_700_000_000 * 10**9
    for session_id in ("fresh", "stale", "current", "temp-chat", "equal", "uncursored"):
        say(world, session_id)
    set_mtimes(world, "fresh", base, None)                      # no summary yet
    set_mtimes(world, "stale", base + 10**9, base)              # history newer than summary
    set_mtimes(world, "current", base, base + 10**9)            # summary newer: nothing to do
    set_mtimes(world, "equal", base, base)                      # not newer
    set_mtimes(world, "temp-chat", base + 10**9, None)          # temporary: never summarized
    set_mtimes(world, "uncursored", base + 10**9, base, cursor=False)  # picked, but only gets a cursor
    (world.sessions.places.sessions_dir / "stray-file").write_text("not a session")
    assert world.summarizer.due() == ["fresh", "stale", "uncursored"]

    clock = FakeClock(START)
    scheduler = Scheduler(clock=clock)
    scheduler.register("summary", world.settings.summary_schedule, world.summarizer.run_job)
    llm_server.script("sum", *[tagged_summary] * 5)
    clock.at(12, 14)
    assert run(scheduler) == 0 and llm_server.calls() == []
    clock.at(12, 15)
    assert run(scheduler) == 1
    assert summarized(llm_server) == ["fresh", "stale"]
    assert llm_server.max_in_flight == 1  # one session at a time
    assert world.stored("fresh").current_discussion.topic == "fresh"
    assert world.stored("stale").current_discussion.topic == "stale"
    assert world.stored("current").current_discussion.topic == "before current"
    assert not (world.directory("temp-chat") / "summary.json").exists()
    assert not (world.directory("temp-chat") / CURSOR).exists()
    assert (world.directory("uncursored") / CURSOR).exists()

    clock.at(12, 30)
    run(scheduler)
    assert summarized(llm_server) == ["fresh", "stale"]  # nothing newer since
    say(world, "current")
    clock.at(12, 45)
    run(scheduler)
    assert summarized(llm_server) == ["fresh", "stale", "current"]


def test_a_run_that_stopped_early_is_retried_at_the_next_tick(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_chunk_chars=120)
    for n in range(3):
        world.say("s", ("user", f"[session s] question {n}"), ("assistant", f"answer {n}"), at=10**18 + n * 10**9)
    llm_server.script("sum", tagged_summary, error(503), tagged_summary, tagged_summary)
    clock = FakeClock(START)
    scheduler = Scheduler(clock=clock)
    scheduler.register("summary", world.settings.summary_schedule, world.summarizer.run_job)
    clock.at(12, 15)
    run(scheduler)
    assert len(llm_server.calls("sum")) == 2
    # The first chunk's summary is newer than history.json, yet two chunks are left.
    directory = world.directory("s")
    assert (directory / "summary.json").stat().st_mtime_ns >= (directory / "history.json").stat().st_mtime_ns
    clock.at(12, 30)
    run(scheduler)
    assert len(llm_server.calls("sum")) == 4
    assert "question 1" in llm_server.calls("sum")[2].user and "question 2" in llm_server.calls("sum")[3].user
    clock.at(12, 45)
    run(scheduler)
    assert len(llm_server.calls("sum")) == 4


def test_without_a_summary_model_the_job_does_nothing(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_model="")
    say(world, "s")
    world.summarizer.run_job()
    assert llm_server.calls() == [] and not (world.directory("s") / "summary.json").exists()


def test_the_job_skips_a_session_being_summarized_and_stops_when_told(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url)
    say(world, "a")
    say(world, "b")
    with world.summarizer.guard("a"):
        llm_server.script("sum", tagged_summary)
        world.summarizer.run_job()
    assert summarized(llm_server) == ["b"]
    world.summarizer.stop()
    world.summarizer.run_job()
    assert summarized(llm_server) == ["b"]

