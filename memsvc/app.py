"""The domain, assembled: every store and worker a running server owns.

The one place that builds the collaborators and hands each to the objects
that talk to it; it owns construction order, what must be done before the
first call (completing interrupted Resets and removals), what keeps the
server from serving (`problems`), and shutdown order. Must never speak a
wire protocol: rpc/server.py binds it to gRPC.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from memsvc.archive.index import Archive
from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.identity import data_dir_id
from memsvc.core.secrets import read_secret
from memsvc.core.units import seconds_to_nanos
from memsvc.fit import refresh
from memsvc.fit.fitter import Fitter
from memsvc.lessons.backend import LessonStore
from memsvc.lessons.service import Lessons
from memsvc.lessons.sqlite import SqliteLessonStore
from memsvc.runtime.jobs import Scheduler
from memsvc.search import rerank
from memsvc.search.hybrid import HybridSearch
from memsvc.search.keyword import KeywordSearch
from memsvc.search.searcher import Searcher
from memsvc.search.semantic import SemanticSearch
from memsvc.summary import llm
from memsvc.summary.context import Contexts
from memsvc.summary.decisions import Judge
from memsvc.summary.summarizer import Summarizer
from memsvc.transfer.export import Exporter
from memsvc.transfer.restore import Importer
from memsvc.transfer.service import Transfers
from memsvc.vectors import embedders
from memsvc.vectors.store import Tuning, VectorStore
from memsvc.window.lifecycle import CompactionQueue, Lifecycle
from memsvc.window.moves import Moves
from memsvc.window.sessions import Sessions
from memsvc.window.transcript import Transcript


class Problem(msgspec.Struct, frozen=True):
    part: str
    "data_dir (nothing can be stored: the server is not serving) or archive (only what needs it is refused)."
    detail: str


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.started_at = time.time_ns()
        self.data_dir_id = data_dir_id(Path(settings.data_dir))
        # Settings that can be wrong (LLM endpoint, embedder, cron) are checked before any thread starts.
        summary_model, decision_model = self.models = llm.models(settings)
        self.judge = Judge(decision_model, settings) if decision_model else None
        self.embedder = embedders.from_settings(settings)
        self.reranker = rerank.from_settings(settings)
        self.model_table = refresh.from_settings(settings)
        self.jobs = Scheduler()
        offset = seconds_to_nanos(settings.clock_offset_seconds)

        def lessons_clock() -> int:
            return time.time_ns() + offset

        # A lesson database that refuses the login fails the start here, before the other stores open.
        lesson_store = lesson_store_from_settings(settings, lessons_clock)

        self.archive = Archive(settings.store_dir, settings.archive_commit_seconds)
        tuning = Tuning(settings.vector_rebuild_rows, settings.vector_trees, settings.vector_search_k)
        self.vectors = VectorStore(settings.store_dir / "vectors", self.embedder, tuning)
        compactions = CompactionQueue()
        self.sessions = Sessions(settings, derived=[self.archive, self.vectors], embeddings=self.vectors,
                                 on_oversize=compactions.request)
        # Reads across the compaction cut: messages compacted out before a run are still summarized.
        self.transcript = Transcript(self.sessions, self.archive)
        self.summarizer = Summarizer(settings, self.sessions, self.transcript.messages_after, summary_model, self.judge)
        self.lifecycle = Lifecycle(self.sessions, self.archive, compactions, exclusive=[self.summarizer.guard])
        self.contexts = Contexts(self.sessions, self.judge, cached_sessions=settings.max_open_sessions)
        # Exports, holds and drops wait for a summary run on the session, as Reset does.
        moves = Moves(self.sessions)
        importer = Importer(settings, moves, self.archive)
        importer.recover()
        self.transfers = Transfers(
            self.sessions, self.lifecycle, moves, self.archive,
            Exporter(self.sessions, moves, self.archive, exclusive=[self.summarizer.guard],
                     shard_name=settings.shard_name),
            importer, exclusive=[self.summarizer.guard])

        keyword = KeywordSearch(self.sessions, self.archive)
        semantic = SemanticSearch(self.sessions, self.vectors, self.embedder)
        self.searcher = Searcher(keyword, semantic, HybridSearch(keyword, semantic, self.reranker))

        self.lessons = Lessons(lesson_store, ttl_days=settings.error_ttl_days, clock=lessons_clock,
                               embedder=self.embedder)

        # In-run compaction: the model table refreshes itself in the background, never on a request.
        self.fitter = Fitter(settings, self.model_table, self.summarizer, summary_model)
        self.model_table.start()

        self.store = durable.DataPaths([settings.store_dir])

        # Before the first call: a Reset or removal a kill interrupted is done in full, never left half done.
        self.lifecycle.finish_interrupted()
        self.jobs.register("summary", settings.summary_schedule, self.summarizer.run_job)
        self.jobs.register("temp-cleanup", "* * * * *", self.lifecycle.remove_idle_temporary)
        self.jobs.register("finish-interrupted", "* * * * *", self.lifecycle.finish_interrupted)
        self.jobs.register("lesson-purge", settings.error_purge_schedule, self.lessons.purge_expired)
        self.jobs.start()

    def problems(self) -> list[Problem]:
        """What keeps the server from serving in full, now; cheap (a few stats) so health can ask often."""
        found = []
        missing: Path | None = self.sessions.storage.missing() or self.store.missing()
        if missing is not None:
            found.append(Problem("data_dir", f"{missing} was deleted or replaced while the server ran"))
        if self.archive.damage.problem is not None:
            found.append(Problem("archive", self.archive.damage.problem))
        return found

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop background work within about `timeout` seconds (shutdown_grace_seconds by
        default); called once, after the last RPC."""
        deadline = time.monotonic() + (self.settings.shutdown_grace_seconds if timeout is None else timeout)

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.summarizer.stop()
        self.jobs.stop(timeout=left())
        self.model_table.close()
        for model in filter(None, self.models):
            model.endpoint.close()
        self.reranker.close()
        self.lifecycle.close(timeout=left())
        self.sessions.close()
        self.archive.close(timeout=left())
        self.vectors.close(timeout=left())
        self.lessons.close()


def lesson_store_from_settings(settings: Settings, clock: Callable[[], int]) -> LessonStore:
    """The backend lessons_backend names: this server's SQLite file, or a PostgreSQL database shared by servers."""
    if settings.lessons_backend == "postgres":
        from memsvc.lessons.postgres import PostgresLessonStore  # psycopg loads (~0.1 s) only where it is used

        password = read_secret("lessons_password_file", settings.lessons_password_file, "MEMSVC_LESSONS_PASSWORD")
        return PostgresLessonStore(settings.lessons_dsn, password=password, pool_size=settings.lessons_pool_size)
    return SqliteLessonStore(settings.store_dir / "lessons.sqlite3", clock=clock)
