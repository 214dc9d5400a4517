"""A real `/v1/rerank` server (the Cohere / Jina / vLLM shape) on 127.0.0.1, for tests and benchmarks.

It scores each document by how many of the query's words it holds (so the
order it gives is meaningful and predictable), or by a scoring function it
is given; it records every request, and `hang()` makes it hold every answer
until `release()` (or its own shutdown), as a stuck provider would.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import JSONHandler, Loopback

Scorer = Callable[[str, Sequence[str]], list[float]]


def shared_words(query: str, documents: Sequence[str]) -> list[float]:
    words = set(re.findall(r"\w+", query.lower()))
    return [float(len(words & set(re.findall(r"\w+", document.lower())))) for document in documents]


class RerankServer(Loopback):
    def __init__(self, scorer: Scorer = shared_words):
        self.scorer = scorer
        self.received: list[dict] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._released.set()
        super().__init__(self._handler(), "/v1")

    def hang(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def stop(self) -> None:
        self.release()  # a held answer would keep the shutdown waiting for its thread
        super().stop()

    def _answer(self, body: dict) -> bytes:
        with self._lock:
            self.received.append(body)
        self._released.wait()
        scores = self.scorer(body["query"], body["documents"])
        results = sorted(({"index": index, "relevance_score": score} for index, score in enumerate(scores)),
                         key=lambda result: -result["relevance_score"])
        return json.dumps({"results": results[:body.get("top_n") or len(results)]}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                status, payload = (200, server._answer(body)) if self.path == "/v1/rerank" else (404, b"{}")
                self.answer(status, payload)

        return Handler
