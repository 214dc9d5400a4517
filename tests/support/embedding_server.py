"""A real OpenAI-compatible `/v1/embeddings` server on 127.0.0.1, for tests.

It answers with the builtin embedder's vectors (so results are meaningful and
deterministic), records every request it receives, and can be told to fail:
`fail(count, status)` answers the next `count` requests with that HTTP status,
`delay` holds every answer back. The memsvc server under test reaches it over
loopback exactly as it would reach a provider.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

import msgspec

from memsvc.core.http import Provider
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.embedders.openai import HttpEmbedder
from tests.support.loopback import JSONHandler, Loopback


class Received(msgspec.Struct):
    path: str
    authorization: str
    body: dict


class EmbeddingServer(Loopback):
    def __init__(self, dimension: int = 64, answer_dimension: int | None = None):
        self.embedder = BuiltinEmbedder(answer_dimension or dimension)
        self.received: list[Received] = []
        self.delay = 0.0
        self.shuffle = False
        self._failures: list[int] = []
        self._lock = threading.Lock()
        super().__init__(self._handler(), "/v1")

    def fail(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures = [status] * count

    def inputs(self) -> list[list[str]]:
        """The texts of every embedding request, one list per request."""
        with self._lock:
            return [list(request.body["input"]) for request in self.received]

    def _answer(self, path: str, authorization: str, body: dict) -> tuple[int, bytes]:
        with self._lock:
            self.received.append(Received(path, authorization, body))
            status = self._failures.pop(0) if self._failures else 200
        if self.delay:
            time.sleep(self.delay)
        if status != 200:
            return status, b'{"error": {"message": "injected failure"}}'
        vectors = self.embedder.vectors(body["input"]).tolist()
        data = [{"object": "embedding", "index": index, "embedding": vector} for index, vector in enumerate(vectors)]
        if self.shuffle:
            data.reverse()
        reply = {"object": "list", "model": body.get("model"), "data": data}
        return 200, json.dumps(reply).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if self.path != "/v1/embeddings":
                    status, payload = 404, b"{}"
                else:
                    status, payload = server._answer(self.path, self.headers.get("Authorization", ""), body)
                self.answer(status, payload)

        return Handler


def http_embedder(base_url: str, dimension: int, api_key: str = "", *, model: str = "m", timeout: float = 30.0,
                  max_retries: int = 3, **options: int) -> HttpEmbedder:
    """The OpenAI-compatible embedder against `base_url`, backing off briefly between retries."""
    provider = Provider(base_url, api_key, setting="embedding_base_url", timeout=timeout, max_retries=max_retries,
                        first_backoff=0.01)
    return HttpEmbedder(provider, model, dimension, **options)
