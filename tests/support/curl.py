"""The real `curl` against the HTTP listener: memsvc as an operator reaches it without a gRPC client.

`post(base, "MemoryService/Append", {...})` sends the JSON exactly as the one-liners of docs/http.md
do and returns the HTTP status with the decoded reply or Connect error.
"""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from google.rpc import error_details_pb2

ERROR_INFO = "google.rpc.ErrorInfo"


@dataclass
class Reply:
    status: int
    body: dict[str, Any]

    @property
    def code(self) -> str:
        """The Connect error code ("invalid_argument"...); "" on success."""
        return self.body.get("code", "") if self.status != 200 else ""

    @property
    def reason(self) -> str:
        """The ErrorInfo reason, decoded from the detail's bytes (not its debug copy)."""
        for detail in self.body.get("details", []):
            if detail["type"] == ERROR_INFO:
                info = error_details_pb2.ErrorInfo.FromString(base64.b64decode(detail["value"] + "=="))
                assert detail["debug"]["reason"] == info.reason  # the readable copy a person sees agrees
                return info.reason
        return ""


def post(base: str, rpc: str, body: dict[str, Any] | str, *, token: str | None = None,
         options: tuple[str, ...] = ()) -> Reply:
    """POST `body` (a dict is sent as JSON; a str as is) to `{base}/memsvc.v1.{rpc}`."""
    data = body if isinstance(body, str) else json.dumps(body)
    command = ["curl", "-sS", "--max-time", "60", "-H", "content-type: application/json", "--data-binary", "@-",
               "-w", "\n%{http_code}", *options]
    if token is not None:
        command += ["-H", f"authorization: Bearer {token}"]
    done = subprocess.run([*command, f"{base}/memsvc.v1.{rpc}"], input=data, capture_output=True, text=True,
                          timeout=90, check=True)
    text, _, status = done.stdout.rpartition("\n")
    return Reply(int(status), json.loads(text) if text.strip() else {})


@dataclass
class Streamed:
    status: int
    messages: list[dict[str, Any]]
    end: dict[str, Any]
    """The end-of-stream message: {} on success, {"error": {...}} when the stream failed."""


def stream(base: str, rpc: str, messages: list[dict[str, Any]], *, token: str | None = None) -> Streamed:
    """A Connect streaming call (server- or client-streaming): `messages` enveloped as JSON, the
    reply's envelopes decoded, its end-of-stream message apart."""
    body = b"".join(_envelope(0, json.dumps(message).encode()) for message in messages)
    command = ["curl", "-sS", "--max-time", "60", "-H", "content-type: application/connect+json",
               "-H", "connect-protocol-version: 1", "--data-binary", "@-", "-w", "%{http_code}"]
    if token is not None:
        command += ["-H", f"authorization: Bearer {token}"]
    done = subprocess.run([*command, f"{base}/memsvc.v1.{rpc}"], input=body, capture_output=True, timeout=90,
                          check=True)
    data, status = done.stdout[:-3], int(done.stdout[-3:])
    replies, end = [], {}
    while data:
        flags, size = data[0], int.from_bytes(data[1:5], "big")
        payload, data = json.loads(data[5:5 + size] or b"{}"), data[5 + size:]
        if flags & 0x02:
            end = payload
        else:
            replies.append(payload)
    return Streamed(status, replies, end)


def _envelope(flags: int, payload: bytes) -> bytes:
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload
