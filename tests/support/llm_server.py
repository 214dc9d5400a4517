"""A real chat-completions server on loopback for tests.

It speaks the OpenAI-compatible protocol (`POST .../chat/completions`),
answers each model from its own script of replies, and records every request
it got (body and headers), so tests see exactly what memsvc sent. A request
with no scripted reply left gets HTTP 400 "no scripted reply", which memsvc
does not retry. Import the `llm_server` fixture into a test module to use it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support.loopback import JSONHandler, Loopback


@dataclass
class Reply:
    """One scripted answer: a completion, an HTTP error, or raw bytes, after an optional delay."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self, model: str) -> bytes:
        if self.body is not None:
            return self.body
        if self.status != 200:
            return json.dumps({"error": {"message": self.content or f"HTTP {self.status}"}}).encode()
        return json.dumps({"id": "chatcmpl-test", "object": "chat.completion", "model": model,
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": self.content}}]}).encode()


def error(status: int, message: str = "", retry_after: float | None = None) -> Reply:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Reply(content=message or f"HTTP {status}", status=status, headers=headers)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return self.body["model"]

    @property
    def system(self) -> str:
        return next(m["content"] for m in self.body["messages"] if m["role"] == "system")

    @property
    def user(self) -> str:
        return next(m["content"] for m in self.body["messages"] if m["role"] == "user")


Scripted = Reply | str | Callable[[Request], "Reply | str"]


class LLMServer(Loopback):
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.scripts: dict[str, deque[Scripted]] = defaultdict(deque)
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        super().__init__(self._handler(), "/v1")

    def script(self, model: str, *replies: Scripted) -> None:
        """Queue replies for `model`: a text, a Reply, or a function of the request."""
        with self._lock:
            self.scripts[model].extend(replies)

    def calls(self, model: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if model is None or r.model == model]

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            queued = self.scripts[request.model]
            scripted = queued.popleft() if queued else Reply(f"no scripted reply for {request.model}", status=400)
        if callable(scripted):
            scripted = scripted(request)
        return Reply(content=scripted) if isinstance(scripted, str) else scripted

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(Reply("unknown path", status=404), "")
                    return
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._answer(request)
                try:
                    time.sleep(reply.delay)
                    self._send(reply, request.model)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, reply: Reply, model: str) -> None:
                payload = reply.payload(model)
                self.answer(reply.status, payload, reply.headers)

        return Handler


@pytest.fixture
def llm_server():
    server = LLMServer().start()
    yield server
    server.stop()


def summary_reply(key_decisions: list[str] | None = None, topic: str = "topic", **extra: Any) -> str:
    """A well-formed reply of the summary model."""
    data = {"key_decisions": key_decisions or [], "past_discussions": [],
            "current_discussion": {"topic": topic, "description": "d", "perspectives": "p", "direction": "x"},
            **extra}
    return f"<summary>{json.dumps(data, ensure_ascii=False)}</summary>"
