"""Calls to outside HTTP providers (LLMs, embedding endpoints), with one retry policy.

Owns the pooled httpx client, the bearer key header, timeouts, and which
failures are retried: transport errors (refused, reset, timed out), 5xx and
408/409/425/429, with exponential backoff and full jitter, honouring
`Retry-After`; never another 4xx. A call that still fails raises
`ProviderFailure` saying what went wrong, for the caller to turn into its own
domain error. Must never log or echo the key or a request body.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

import httpx

from memsvc.core.errors import InvalidSetting

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_BACKOFF_SECONDS = 30.0
PROVIDER_DETAIL_CHARS = 300


class ProviderFailure(Exception):
    """The provider's last answer: `status` 0 when it never answered (then `detail` names the transport error)."""

    def __init__(self, url: str, status: int, detail: str):
        super().__init__(f"{url}: HTTP {status} {detail}" if status else f"{url}: {detail}")
        self.url, self.status, self.detail = url, status, detail

    @property
    def transient(self) -> bool:
        """Retrying later may work: the provider was down, slow, rate limiting or failing."""
        return self.status == 0 or self.status >= 500 or self.status in RETRYABLE_STATUS


class Provider:
    """One provider base URL; thread-safe (one pooled client)."""

    def __init__(self, base_url: str, api_key: str = "", *, setting: str, timeout: float, max_retries: int,
                 first_backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep):
        if not base_url.startswith(("http://", "https://")):
            raise InvalidSetting(f"{setting} must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.first_backoff = first_backoff
        self.sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def post_json(self, path: str, body: bytes, *, timeout: float | None = None,
                  max_retries: int | None = None) -> bytes:
        """POST `body` (JSON) to `path`; the body of the 200 reply, else ProviderFailure after the retries."""
        return self._send("POST", path, body, timeout, max_retries)

    def get(self, path: str = "", *, timeout: float | None = None, max_retries: int | None = None) -> bytes:
        """GET `path`; the body of the 200 reply, else ProviderFailure after the retries."""
        return self._send("GET", path, None, timeout, max_retries)

    def _send(self, method: str, path: str, body: bytes | None, timeout: float | None,
              max_retries: int | None) -> bytes:
        url = self.base_url + path
        retries = self.max_retries if max_retries is None else max_retries
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in range(retries + 1):
            wait: float | None = None
            try:
                response = self.http.request(method, url, content=body, timeout=timeout or self.timeout,
                                             headers=headers)
            except httpx.TransportError as exc:
                failure = ProviderFailure(url, 0, type(exc).__name__)
            else:
                if response.status_code == 200:
                    return response.content
                failure = ProviderFailure(url, response.status_code, _detail(response))
                wait = _retry_after(response)
            if not failure.transient or attempt == retries:
                raise failure
            delay = min(MAX_BACKOFF_SECONDS, wait if wait is not None else self._backoff(attempt))
            log.info("provider call failed, retrying", extra={"path": path, "status": failure.status,
                                                              "attempt": attempt + 1, "delay_seconds": round(delay, 3)})
            self.sleep(delay)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> float:
        """Exponential with full jitter, so retrying clients spread out."""
        return random.uniform(0.5, 1.0) * self.first_backoff * 2.0 ** attempt


def _detail(response: httpx.Response) -> str:
    """The provider's own error message, short: it tells a person what to fix."""
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:PROVIDER_DETAIL_CHARS] if message else ""


def _retry_after(response: httpx.Response) -> float | None:
    value: str = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
