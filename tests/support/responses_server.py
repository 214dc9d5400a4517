"""A real OpenAI Responses API server on loopback, standing in for the model an Agents SDK run calls.

`POST .../responses` answers each request with the output items its script gives (a function of
the request body, so a reply can follow what the agent sent: a tool call first, then a message
once the tool's output is in the input), and records every request body. Only the non-streamed
form the SDK's `Runner.run` uses is spoken. Import the `responses_server` fixture to use it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support.loopback import JSONHandler, Loopback

Script = Callable[[dict[str, Any]], list[dict[str, Any]]]


def message(text: str, item_id: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def function_call(name: str, arguments: dict[str, Any], call_id: str, item_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}


def reasoning(summary: str, item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": summary}]}


class ResponsesServer(Loopback):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: Script = lambda body: [message("no script", "msg_none")]
        self._lock = threading.Lock()
        super().__init__(self._handler(), "/v1")

    def _reply(self, body: dict[str, Any]) -> bytes:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
        output = self.script(body)
        return json.dumps({
            "id": f"resp_{number}", "object": "response", "created_at": time.time(), "model": body.get("model", ""),
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                   "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = 404, b'{"error": {"message": "unknown path"}}'
                if self.path.endswith("/responses") and not body.get("stream"):
                    status, payload = 200, server._reply(body)
                self.answer(status, payload)

        return Handler


@pytest.fixture
def responses_server():
    server = ResponsesServer().start()
    yield server
    server.stop()
