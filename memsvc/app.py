"""The domain, assembled: every store and worker a running server owns.

Owns construction order and shutdown order. Must never speak gRPC: server.py
binds it to the wire.
"""

from __future__ import annotations

import time

from . import embedders, llm
from .archive import Archive
from .config import Settings
from .decisions import Judge
from .jobs import Scheduler
from .lessons import Lessons
from .lifecycle import Lifecycle
from .search import Searcher
from .semantic import SemanticSearch
from .sessions import Sessions
from .summarizer import Summarizer
from .vectors import Tuning, VectorStore


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.sessions = Sessions(settings)
        # Settings that can be wrong (LLM endpoint, cron) are checked before any thread starts.
        summary_model, decision_model = self.models = llm.models(settings)
        self.judge = Judge(decision_model, settings) if decision_model else None
        self.archive = Archive(settings.store_dir, settings.archive_commit_seconds)
        self.sessions.derived.append(self.archive)
        self.embedder = embedders.from_settings(settings)
        self.vectors = VectorStore(settings.store_dir / "vectors", self.embedder,
                                   lambda session_id: self.sessions.records_after(session_id, 0),
                                   Tuning(settings.vector_rebuild_rows, settings.vector_trees, settings.vector_search_k,
                                          settings.max_open_sessions))
        self.sessions.derived.append(self.vectors)
        self.sessions.embeddings = self.vectors
        self.lifecycle = Lifecycle(self.sessions, self.archive)
        self.searcher = Searcher(self.sessions, self.archive, SemanticSearch(self.sessions, self.vectors, self.embedder))
        # Reads across the compaction cut: messages compacted out before a run are still summarized.
        self.summarizer = Summarizer(settings, self.sessions, self.lifecycle.messages_after, summary_model,
                                     self.judge)
        self.lifecycle.exclusive.append(self.summarizer.guard)
        self.jobs = Scheduler()
        self.jobs.register("summary", settings.summary_schedule, self.summarizer.run_job)
        self.jobs.register("temp-cleanup", "* * * * *", self.lifecycle.remove_idle_temporary)
        offset = int(settings.clock_offset_seconds * 1_000_000_000)
        self.lessons = Lessons(settings.store_dir / "lessons.sqlite3", ttl_days=settings.error_ttl_days,
                               clock=lambda: time.time_ns() + offset, embedder=self.embedder)
        self.jobs.register("lesson-purge", settings.error_purge_schedule, self.lessons.purge_expired)
        self.jobs.start()

    def close(self) -> None:
        """Flush and stop background work; called once, after the last RPC."""
        self.summarizer.stop()
        self.jobs.stop()
        for model in filter(None, self.models):
            model.endpoint.close()
        self.lifecycle.close()
        self.archive.close()
        self.vectors.close()
        self.lessons.close()
