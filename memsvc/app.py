"""The domain, assembled: every store and worker a running server owns.

The one place that builds the collaborators and hands each to the objects
that talk to it: what every tenant shares (`App`: settings, the journal,
the embedder, the LLM models, the model table, the jobs) and what each
tenant has of its own (`Tenant`: its sessions, archive, vectors, summaries,
lessons and the services over them, under its part of the data directory).
It owns construction order, what must be done before the first call
(completing interrupted Resets and removals), what keeps the server from
serving (`problems`), and shutdown order. Must never speak a wire protocol:
rpc/server.py binds it to gRPC.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from memsvc.archive.index import Archive
from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.identity import data_dir_id
from memsvc.core.layout import DEFAULT_TENANT, Layout, TenantLayout
from memsvc.core.secrets import read_secret
from memsvc.core.units import seconds_to_nanos
from memsvc.fit import refresh
from memsvc.fit.fitter import Fitter
from memsvc.journal.journal import Journal
from memsvc.lessons.backend import LessonStore
from memsvc.lessons.service import Lessons
from memsvc.lessons.sqlite import SqliteLessonStore
from memsvc.lifecycle.cleanup import TemporaryCleanup
from memsvc.lifecycle.clearing import Clearing
from memsvc.lifecycle.compaction import Compaction, CompactionQueue
from memsvc.lifecycle.intents import Intents
from memsvc.runtime import metrics
from memsvc.runtime.history import STEP_SECONDS, History
from memsvc.runtime.jobs import Scheduler
from memsvc.search import rerank
from memsvc.search.hybrid import HybridSearch
from memsvc.search.keyword import KeywordSearch
from memsvc.search.searcher import Searcher
from memsvc.search.semantic import SemanticSearch
from memsvc.shards.holds import CreationPause, Holds
from memsvc.shards.moves import Moves
from memsvc.summary import llm
from memsvc.summary.context import Contexts
from memsvc.summary.decisions import Judge
from memsvc.summary.summarizer import Summarizer
from memsvc.tenancy.tenants import Directory, TenantEntry
from memsvc.tenancy.usage import Usage, directory_bytes
from memsvc.transfer.export import Exporter
from memsvc.transfer.restore import Importer
from memsvc.transfer.service import Transfers
from memsvc.vectors import embedders
from memsvc.vectors.embedders.base import Embedder
from memsvc.vectors.store import Tuning, VectorStore
from memsvc.window.appender import Appender, ByteQuota
from memsvc.window.derived import DerivedStore, EmbeddingSink
from memsvc.window.lister import Lister
from memsvc.window.rewriter import Rewriter
from memsvc.window.store import SessionStore
from memsvc.window.transcript import Transcript

if TYPE_CHECKING:  # psycopg loads only when lessons_backend = postgres
    from memsvc.lessons.postgres import PostgresDatabase

MANY = 2**62
"No quota."
SIZES_EVERY_STEPS = 6
"Stored bytes per tier are walked every this many history steps (a minute), not every step."
TENANTS_FILE_CHECK_SECONDS = 1.0
"How often the tenants file is looked at (one stat): rotated tokens take effect within about this."
HOLD_LEASE_CHECK_SECONDS = 2.0
"How often lapsed holds are ended: well within a lease's FENCE, so a move's target aborts before its source serves."


class Problem(msgspec.Struct, frozen=True):
    part: str
    """data_dir (nothing can be stored: the server is not serving), archive (only what needs it is refused) or
    archive_session (one session's archive is refused; every other session is served)."""
    detail: str


class Shared:
    """What a tenant's services use of the server's shared parts."""

    def __init__(self, settings: Settings, journal: Journal, embedder: Embedder,
                 reranker: rerank.Reranker, models: tuple[llm.Model | None, llm.Model | None], judge: Judge | None,
                 model_table: refresh.ModelTable):
        self.settings = settings
        self.journal = journal
        self.embedder = embedder
        self.reranker = reranker
        self.models = models
        self.judge = judge
        self.model_table = model_table
        self.pause = CreationPause()
        "Creating sessions paused on the whole server (every tenant) while shards change."


class SessionParts:
    """Tier 1 of one tenant, each part to be handed on to what uses it (never this bundle itself)."""

    def __init__(self, settings: Settings, places: TenantLayout, journal: Journal, *,
                 derived: Sequence[DerivedStore], embeddings: EmbeddingSink | None,
                 on_oversize: Callable[[str], None], max_sessions: Callable[[], int] | None = None,
                 quota: ByteQuota | None = None, pause: CreationPause | None = None,
                 clock: Callable[[], int] = time.time_ns):
        durable.ensure_dir(places.sessions_dir)
        self.holds = Holds(places, clock, lease_seconds=settings.hold_lease_seconds, quota=settings.max_held_sessions,
                           pause=pause)
        self.intents = Intents(places)
        self.store = SessionStore(settings, places, journal, holds=self.holds, intents=self.intents,
                                  derived=derived,
                                  storage=durable.DataPaths([Path(settings.data_dir), places.sessions_dir]),
                                  max_sessions=max_sessions)
        self.appender = Appender(settings, self.store, derived=derived, embeddings=embeddings,
                                 on_oversize=on_oversize, quota=quota, clock=clock)
        self.rewriter = Rewriter(self.store)
        self.lister = Lister(places, self.store, self.store.storage)


class Tenant:
    """One tenant's memory: its sessions and every store and service over them, under `places`; `quota()` is
    its tenants file entry in force (no quota of its own without one)."""

    def __init__(self, shared: Shared, places: TenantLayout, lesson_store: LessonStore, *,
                 quota: Callable[[], TenantEntry] | None = None, lessons_clock: Callable[[], int] = time.time_ns,
                 clock: Callable[[], int] = time.time_ns):
        settings = shared.settings
        summary_model, _ = shared.models
        self.name = places.name
        self.places = places
        entry = quota or (lambda: TenantEntry(places.name))
        self.usage = Usage(places.name, [places.sessions_dir, places.store_dir], lambda: entry().max_bytes)
        self.archive = Archive(places.store_dir, settings.archive_commit_seconds)
        tuning = Tuning(settings.vector_rebuild_rows, settings.vector_trees, settings.vector_search_k)
        self.vectors = VectorStore(places.vectors_dir, shared.embedder, tuning)
        derived: list[DerivedStore] = [self.archive, self.vectors]
        compactions = CompactionQueue()
        parts = SessionParts(settings, places, shared.journal, derived=derived, embeddings=self.vectors,
                             on_oversize=compactions.request, quota=self.usage, pause=shared.pause, clock=clock,
                             max_sessions=lambda: min(settings.max_sessions, entry().max_sessions or MANY))
        self.holds, intents, self.store = parts.holds, parts.intents, parts.store
        self.appender, rewriter, self.lister = parts.appender, parts.rewriter, parts.lister
        # Reads across the compaction cut: messages compacted out before a run are still summarized.
        self.transcript = Transcript(self.store, self.archive, reply_bytes=settings.max_reply_bytes)
        self.summarizer = Summarizer(settings, self.store, self.lister, self.transcript.messages_after,
                                     summary_model, shared.judge)
        self.compaction = Compaction(settings, self.store, rewriter, self.archive, derived, compactions)
        self.clearing = Clearing(settings, self.store, rewriter, intents, self.archive, derived,
                                 exclusive=[self.summarizer.guard])
        self.cleanup = TemporaryCleanup(self.lister, self.clearing.remove, clock)
        self.contexts = Contexts(self.store, shared.judge, cached_sessions=settings.max_open_sessions,
                                 reply_bytes=settings.max_reply_bytes)
        # Exports, holds and drops wait for a summary run on the session, as Reset does.
        moves = Moves(self.store, rewriter, self.holds)
        importer = Importer(settings, moves, self.archive, self.usage)
        importer.recover()
        self.transfers = Transfers(
            self.clearing, moves, self.archive, derived,
            Exporter(self.store, moves, self.archive, exclusive=[self.summarizer.guard],
                     shard_name=settings.shard_name, part_bytes=settings.max_reply_bytes),
            importer, exclusive=[self.summarizer.guard])
        keyword = KeywordSearch(self.store, self.archive)
        semantic = SemanticSearch(self.store, self.vectors, shared.embedder,
                                  window_size=settings.max_history_messages)
        self.searcher = Searcher(keyword, semantic, HybridSearch(keyword, semantic, shared.reranker),
                                 reply_bytes=settings.max_reply_bytes)
        self.lessons = Lessons(lesson_store, ttl_days=settings.error_ttl_days, clock=lessons_clock,
                               embedder=shared.embedder)
        # In-run compaction: the model table refreshes itself in the background, never on a request.
        self.fitter = Fitter(settings, shared.model_table, self.summarizer, summary_model)
        self.stores = durable.DataPaths([places.store_dir])
        # Before the first call: a Reset or removal a kill interrupted is done in full, never left half done.
        self.clearing.finish_interrupted()
        self.usage.measure()

    def schedule(self, jobs: Scheduler, settings: Settings) -> None:
        """The tenant's periodic work (the default tenant's job names carry no suffix)."""
        suffix = "" if self.name == DEFAULT_TENANT else f":{self.name}"
        jobs.register(f"summary{suffix}", settings.summary_schedule, self.summarizer.run_job)
        jobs.register(f"temp-cleanup{suffix}", "* * * * *", self.cleanup.remove_idle)
        jobs.register(f"finish-interrupted{suffix}", "* * * * *", self.clearing.finish_interrupted)
        jobs.register(f"hold-leases{suffix}", HOLD_LEASE_CHECK_SECONDS, self.transfers.lapse)
        jobs.register(f"usage{suffix}", "* * * * *", self.usage.measure)
        jobs.register(f"lesson-purge{suffix}", settings.error_purge_schedule, self.lessons.purge_expired)

    def problems(self) -> list[Problem]:
        found = []
        missing: Path | None = self.store.storage.missing() or self.stores.missing()
        if missing is not None:
            found.append(Problem("data_dir", f"{missing} was deleted or replaced while the server ran"))
        if self.archive.damage.problem is not None:
            found.append(Problem("archive", self.archive.damage.problem))
        found += [Problem("archive_session", f"session {session_id!r}: {why}")
                  for session_id, why in sorted(self.archive.set_aside().items())]
        return found

    def gauges(self) -> dict[str, float]:
        """What the metrics history plots of this tenant now, but its stored bytes (cheap: no disk)."""
        # The vector store keeps no backlog count of its own: its sessions' pending messages, read as they are.
        backlog = sum(len(state.pending) for state in list(self.vectors._states.values()))
        return {"sessions": float(self.store.stored), "embedding_backlog": float(backlog)}

    def stored_bytes(self) -> dict[str, float]:
        """The bytes each tier stores on disk (walks the tenant's directories)."""
        return {"bytes_window": float(directory_bytes(self.places.sessions_dir)),
                "bytes_vectors": float(directory_bytes(self.places.vectors_dir)),
                "bytes_archive": float(directory_bytes(self.archive.directory))}

    def stop(self) -> None:
        """Stop starting work (a summary run in flight finishes its chunk)."""
        self.summarizer.stop()

    def close(self, left: Callable[[], float]) -> None:
        self.compaction.close(timeout=left())
        self.archive.close(timeout=left())
        self.vectors.close(timeout=left())
        self.lessons.close()


class App:
    """`directory`: the tenants file (tenants_file), when the server is shared by tenants."""

    def __init__(self, settings: Settings, directory: Directory | None = None):
        self.settings = settings
        self.directory = directory
        self.started_at = time.time_ns()
        self.data_dir_id = data_dir_id(Path(settings.data_dir))
        # Settings that can be wrong (LLM endpoint, embedder, cron) are checked before any thread starts.
        self.models = llm.models(settings)
        decision_model = self.models[1]
        judge = Judge(decision_model, settings) if decision_model else None
        self.embedder = embedders.from_settings(settings)
        self.reranker = rerank.from_settings(settings)
        self.model_table = refresh.from_settings(settings)
        self.jobs = Scheduler()
        offset = seconds_to_nanos(settings.clock_offset_seconds)

        def lessons_clock() -> int:
            return time.time_ns() + offset

        self.lessons_clock = lessons_clock
        self.layout = Layout(settings.data_dir)
        # A lesson database that refuses the login fails the start here, before the other stores open.
        self.lesson_database = lesson_database_from_settings(settings)
        durable.ensure_dir(self.layout.data_dir)
        # Replays what a crash left into every history.json before anything reads one.
        self.journal = Journal(self.layout.journal, self.layout.data_dir)
        self.shared = Shared(settings, self.journal, self.embedder, self.reranker, self.models, judge,
                             self.model_table)
        self.tenants: dict[str, Tenant] = {}
        self._opening = threading.Lock()
        self.model_table.start()
        # The tenants with data here serve (and run their jobs) from the start; others open at their first call.
        for name in [DEFAULT_TENANT, *self.layout.tenant_names()]:
            self.tenant(name)
        self.history = History()
        metrics.listen_to_calls(self.history.record)
        self._stored_bytes: dict[str, dict[str, float]] = {}
        self._history_steps = 0
        self.jobs.register("metrics-history", STEP_SECONDS, self.sample_history)
        if directory is not None:
            self.jobs.register("tenants-file", TENANTS_FILE_CHECK_SECONDS, directory.refresh)
        self.jobs.start()

    def tenant(self, name: str = DEFAULT_TENANT) -> Tenant:
        """The tenant's memory, opened at its first call."""
        tenant = self.tenants.get(name)
        if tenant is not None:
            return tenant
        with self._opening:
            if name not in self.tenants:
                places = self.layout.tenant(name)
                quota = None if self.directory is None else partial(self.directory.quota, name)
                self.tenants[name] = opened = Tenant(self.shared, places, self._lesson_store(places), quota=quota,
                                                     lessons_clock=self.lessons_clock)
                opened.schedule(self.jobs, self.settings)
            return self.tenants[name]

    def tenant_names(self) -> list[str]:
        """The tenants this server serves: the tenants file's, with the default one (and any with data here)."""
        named = self.directory.tenants() if self.directory is not None else []
        return sorted({DEFAULT_TENANT, *named, *self.tenants})

    def sample_history(self) -> None:
        """One step of the metrics history: every open tenant's gauges, its stored bytes once a minute."""
        walk = self._history_steps % SIZES_EVERY_STEPS == 0
        self._history_steps += 1
        readings = {}
        for name, tenant in list(self.tenants.items()):
            if walk or name not in self._stored_bytes:
                self._stored_bytes[name] = tenant.stored_bytes()
            readings[name] = {**tenant.gauges(), **self._stored_bytes[name]}
        self.history.sample(readings)

    def _lesson_store(self, places: TenantLayout) -> LessonStore:
        if self.lesson_database is not None:
            from memsvc.lessons.postgres import PostgresLessonStore

            return PostgresLessonStore(self.lesson_database, places.name)
        return SqliteLessonStore(places.lessons_db, clock=self.lessons_clock)

    def problems(self) -> list[Problem]:
        """What keeps the server from serving in full, now; cheap (a few stats) so health can ask often."""
        found = [problem for tenant in list(self.tenants.values()) for problem in tenant.problems()]
        if self.directory is not None and self.directory.problem is not None:
            found.append(Problem("tenants_file", self.directory.problem))
        return found

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop background work within about `timeout` seconds (shutdown_grace_seconds by
        default); called once, after the last RPC."""
        deadline = time.monotonic() + (self.settings.shutdown_grace_seconds if timeout is None else timeout)

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        for tenant in self.tenants.values():
            tenant.stop()
        self.jobs.stop(timeout=left())
        self.model_table.close()
        for model in filter(None, self.models):
            model.endpoint.close()
        self.reranker.close()
        for tenant in self.tenants.values():
            tenant.compaction.close(timeout=left())
        self.journal.close()
        for tenant in self.tenants.values():
            tenant.close(left)
        if self.lesson_database is not None:
            self.lesson_database.close()


def lesson_database_from_settings(settings: Settings) -> PostgresDatabase | None:
    """The PostgreSQL database shared by servers (and tenants) when lessons_backend names it; None: each tenant
    keeps its lessons in a SQLite file of its own."""
    if settings.lessons_backend != "postgres":
        return None
    from memsvc.lessons.postgres import PostgresDatabase  # psycopg loads (~0.1 s) only where it is used

    password = read_secret("lessons_password_file", settings.lessons_password_file, "MEMSVC_LESSONS_PASSWORD")
    return PostgresDatabase(settings.lessons_dsn, password=password, pool_size=settings.lessons_pool_size)
