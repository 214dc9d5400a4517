"""The server's cron jobs: the rolling-summary job, temp-session cleanup and
the error-memory purge.

Owns when jobs run: each registered job runs on a daemon thread of its own
at the times its cron expression names (local time), or every so many
seconds (`every`, for leases that must end on time), never overlapping
itself; a time that comes while the previous run is still going is skipped,
and times missed while the machine slept are run once. A run refused for a
known condition (a domain error: the data directory deleted, a database
down) is logged once, as the condition, until a run succeeds again; anything
else is a bug and logged with its traceback every time. The clock is
injectable, so tests move time and call `tick()`. Must never know what a job
does, and never run one on the caller's thread (the event loop).

    scheduler = Scheduler()
    scheduler.register("summary", "*/15 * * * *", summarizer.run_job)
    scheduler.start()  ...  scheduler.stop()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from cronsim import CronSim, CronSimError

from memsvc.core.errors import InvalidSetting, MemsvcError

log = logging.getLogger(__name__)

MAX_SLEEP_SECONDS = 30.0
"The loop looks at the clock at least this often, so a clock that jumps is noticed."

Clock = Callable[[], datetime]


def local_now() -> datetime:
    return datetime.now().astimezone()


class Job:
    """`schedule`: a 5-field cron expression, or seconds between runs."""

    def __init__(self, name: str, schedule: str | float, action: Callable[[], object], now: datetime):
        self.name = name
        self.schedule = schedule
        try:
            self.next_at = self.following(now)
        except (CronSimError, StopIteration) as exc:
            raise InvalidSetting(f"job {name}: {schedule!r} is not a cron expression ({exc})") from exc
        self.action = action
        self.thread: threading.Thread | None = None
        self.failing: str | None = None
        "The reason the last runs were refused for, logged once; None while they succeed."

    def following(self, now: datetime) -> datetime:
        """When the job runs next after `now`."""
        if isinstance(self.schedule, str):
            return next(CronSim(self.schedule, now))
        return now + timedelta(seconds=self.schedule)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def _run(self) -> None:
        try:
            self.action()
        except MemsvcError as exc:
            if exc.reason != self.failing:
                log.error("job refused; logged again only once it changes or recovers",
                          extra={"job": self.name, "reason": exc.reason, "detail": exc.message})
            self.failing = exc.reason
            return
        except Exception:
            log.exception("job failed", extra={"job": self.name})
            return
        if self.failing is not None:
            log.info("job recovered", extra={"job": self.name, "reason": self.failing})
            self.failing = None


class Scheduler:
    def __init__(self, clock: Clock = local_now):
        self.clock = clock
        self.jobs: list[Job] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None

    def register(self, name: str, schedule: str | float, action: Callable[[], object]) -> Job:
        """Run `action()` at the times `schedule` (a 5-field cron expression) names, or every `schedule`
        seconds."""
        job = Job(name, schedule, action, self.clock())
        with self._lock:
            self.jobs.append(job)
        return job

    def tick(self) -> list[threading.Thread]:
        """Start every job that is due by the clock; returns the threads started."""
        now = self.clock()
        started = []
        with self._lock:
            for job in self.jobs:
                if job.next_at > now:
                    continue
                job.next_at = job.following(now)
                if job.running:
                    log.warning("job still running, this time skipped", extra={"job": job.name})
                    continue
                job.thread = threading.Thread(target=job._run, name=f"job-{job.name}", daemon=True)
                job.thread.start()
                started.append(job.thread)
        return started

    def start(self) -> None:
        self._loop = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._loop.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            with self._lock:
                soonest = min((job.next_at for job in self.jobs), default=None)
            wait = MAX_SLEEP_SECONDS if soonest is None else (soonest - self.clock()).total_seconds()
            self._stop.wait(min(MAX_SLEEP_SECONDS, max(0.0, wait)))

    def stop(self, timeout: float = 5.0) -> None:
        """Start nothing more; wait up to `timeout` for running jobs (they are told to stop by their owners)."""
        self._stop.set()
        if self._loop is not None:
            self._loop.join(timeout)
        for job in self.jobs:
            if job.thread is not None:
                job.thread.join(timeout)
                if job.thread.is_alive():
                    log.warning("job still running at stop", extra={"job": job.name})
