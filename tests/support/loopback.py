"""A real HTTP server on loopback, served by a thread of its own: what every
stand-in for a provider (LLM, embedding, rerank, JSON tables, Responses API)
shares.

Must never know what a provider speaks: each stand-in brings its handler,
answering with `JSONHandler.answer`.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class JSONHandler(BaseHTTPRequestHandler):
    """A stand-in's request handler: answers JSON, logs nothing."""

    def answer(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up waiting (the timeout tests)

    def log_message(self, format: str, *args: object) -> None:
        pass


class Loopback:
    """Listens on 127.0.0.1 at a free port; `base_url` is its address followed by `prefix`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], prefix: str = ""):
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}{prefix}"
        self._thread = threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
