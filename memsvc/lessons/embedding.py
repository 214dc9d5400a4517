"""The embedding provider as error memory uses it: a bounded wait.

Owns how long a record or lookup waits for the provider (EMBED_WAIT_SECONDS)
and that while one call is still out no other is started, so a provider that
hangs never holds error memory: it answers by keywords alone meanwhile. Must
never store vectors (the backend does) or log the texts it embeds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from memsvc.vectors.embedders.base import Embedder

log = logging.getLogger(__name__)

EMBED_WAIT_SECONDS = 2.0
"Longest a lookup or record waits for the embedding provider before answering by keywords alone."


class LessonEmbedding:
    def __init__(self, embedder: Embedder | None):
        self.embedder = embedder
        self.name = "" if embedder is None else embedder.name
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lessons-embed")
        self._running: Future[np.ndarray] | None = None
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        """(len(texts), dimension) float32, or None without a working embedder or while it is slow."""
        if self.embedder is None:
            return None
        with self._lock:
            if self._running is not None and not self._running.done():
                log.warning("lesson embedding still waiting on the provider; keyword lookup only")
                return None
            self._running = running = self._thread.submit(self.embedder.vectors, texts)
        try:
            vectors = running.result(timeout=EMBED_WAIT_SECONDS)
        except Exception as exc:
            log.warning("lesson embedding failed; keyword lookup only", extra={"error": type(exc).__name__})
            return None
        return np.asarray(vectors, dtype=np.float32)

    def one(self, text: str) -> np.ndarray | None:
        vectors = self.vectors([text])
        return None if vectors is None else vectors[0]

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
