"""The domain, assembled: every store and worker a running server owns.

The one place that builds the collaborators and hands each to the objects
that talk to it; it owns construction order and shutdown order. Must never
speak a wire protocol: rpc/server.py binds it to gRPC.
"""

from __future__ import annotations

import time

from memsvc.archive.index import Archive
from memsvc.core.config import Settings
from memsvc.core.units import seconds_to_nanos
from memsvc.lessons.store import Lessons
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
from memsvc.vectors import embedders
from memsvc.vectors.store import Tuning, VectorStore
from memsvc.window.lifecycle import CompactionQueue, Lifecycle
from memsvc.window.sessions import Sessions
from memsvc.window.transcript import Transcript


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        # Settings that can be wrong (LLM endpoint, embedder, cron) are checked before any thread starts.
        summary_model, decision_model = self.models = llm.models(settings)
        self.judge = Judge(decision_model, settings) if decision_model else None
        self.embedder = embedders.from_settings(settings)
        self.reranker = rerank.from_settings(settings)
        self.jobs = Scheduler()

        self.archive = Archive(settings.store_dir, settings.archive_commit_seconds)
        tuning = Tuning(settings.vector_rebuild_rows, settings.vector_trees, settings.vector_search_k)
        self.vectors = VectorStore(settings.store_dir / "vectors", self.embedder, tuning)
        compactions = CompactionQueue()
        self.sessions = Sessions(settings, derived=[self.archive, self.vectors], embeddings=self.vectors,
                                 on_oversize=compactions.request)
        # Reads across the compaction cut: messages compacted out before a run are still summarized.
        self.summarizer = Summarizer(settings, self.sessions, Transcript(self.sessions, self.archive).messages_after,
                                     summary_model, self.judge)
        self.lifecycle = Lifecycle(self.sessions, self.archive, compactions, exclusive=[self.summarizer.guard])
        self.contexts = Contexts(self.sessions, self.judge, cached_sessions=settings.max_open_sessions)

        keyword = KeywordSearch(self.sessions, self.archive)
        semantic = SemanticSearch(self.sessions, self.vectors, self.embedder)
        self.searcher = Searcher(keyword, semantic, HybridSearch(keyword, semantic, self.reranker))

        offset = seconds_to_nanos(settings.clock_offset_seconds)
        self.lessons = Lessons(settings.store_dir / "lessons.sqlite3", ttl_days=settings.error_ttl_days,
                               clock=lambda: time.time_ns() + offset, embedder=self.embedder)

        self.jobs.register("summary", settings.summary_schedule, self.summarizer.run_job)
        self.jobs.register("temp-cleanup", "* * * * *", self.lifecycle.remove_idle_temporary)
        self.jobs.register("lesson-purge", settings.error_purge_schedule, self.lessons.purge_expired)
        self.jobs.start()

    def close(self) -> None:
        """Flush and stop background work; called once, after the last RPC."""
        self.summarizer.stop()
        self.jobs.stop()
        for model in filter(None, self.models):
            model.endpoint.close()
        self.reranker.close()
        self.lifecycle.close()
        self.archive.close()
        self.vectors.close()
        self.lessons.close()
