"""A real HTTP server on loopback serving JSON documents, for tests of fetched
tables (model_table_url, an endpoint's /models list).

Each path serves the body set for it (or an HTTP error), and every GET is
counted per path, so tests see how often memsvc fetched. Import the
`json_server` fixture into a test module to use it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support.loopback import JSONHandler, Loopback


class JSONServer(Loopback):
    def __init__(self) -> None:
        self.documents: dict[str, tuple[int, bytes, float]] = {}
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def serve(self, path: str, document: Any = None, *, status: int = 200, raw: bytes | None = None,
              delay: float = 0.0) -> str:
        """Serve `document` (as JSON) or `raw` bytes at `path`, after `delay` seconds; returns its URL."""
        body = raw if raw is not None else json.dumps(document).encode()
        with self._lock:
            self.documents[path] = (status, body, delay)
        return self.base_url + path

    def count(self, path: str) -> int:
        with self._lock:
            return self.hits[path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.hits[self.path] += 1
                    status, body, delay = server.documents.get(self.path, (404, b'{"error": "not found"}', 0.0))
                time.sleep(delay)
                self.answer(status, body)

        return Handler


@pytest.fixture
def json_server():
    server = JSONServer().start()
    yield server
    server.stop()
