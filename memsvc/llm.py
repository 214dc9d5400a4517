"""LLMs over an OpenAI-compatible chat-completions HTTP API, and the prompt
files they are given.

Owns the HTTP calls (`POST {llm_base_url}/chat/completions`), the API key
(read from `llm_api_key_file` or MEMSVC_LLM_API_KEY), timeouts, retries with
backoff on 429/5xx and transport errors (never on other 4xx), and turning
every failure into a domain error with a stable reason. Also loads the
versioned prompt files in memsvc/prompts/. Must never log or echo the API
key or conversation text, and never decide what to ask: callers do.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import re
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import httpx
import msgspec

from .config import Settings
from .errors import FailedPrecondition, InvalidSetting, MemsvcError, Unavailable

log = logging.getLogger(__name__)

API_KEY_ENV = "MEMSVC_LLM_API_KEY"
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
PROVIDER_DETAIL_CHARS = 300
_HEADER = re.compile(r"\A<!--.*?-->\s*", re.DOTALL)
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


class ChatMessage(msgspec.Struct):
    role: str
    "system, user or assistant."
    content: str


class _Request(msgspec.Struct):
    model: str
    messages: list[ChatMessage]


class _ReplyMessage(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    message: _ReplyMessage


class _Reply(msgspec.Struct):
    choices: list[_Choice]


_decode_reply = msgspec.json.Decoder(_Reply).decode


class LLMUnavailable(Unavailable):
    """The endpoint could not answer now (down, timing out, rate limited, 5xx); retrying later may work."""

    reason = "LLM_UNAVAILABLE"


class LLMRejected(FailedPrecondition):
    """The endpoint refused the request (4xx): a setting (key, model, URL) needs fixing."""

    reason = "LLM_REQUEST_REJECTED"


class LLMBadResponse(MemsvcError):
    """The endpoint answered 200 with something that is not a chat completion."""

    reason = "LLM_BAD_RESPONSE"


def api_key(settings: Settings, environ: dict[str, str] | None = None) -> str:
    """The key from llm_api_key_file, else MEMSVC_LLM_API_KEY, else none (local servers need none)."""
    if settings.llm_api_key_file:
        try:
            return Path(settings.llm_api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidSetting(f"cannot read llm_api_key_file {settings.llm_api_key_file}: {exc.strerror}") from exc
    return (os.environ if environ is None else environ).get(API_KEY_ENV, "").strip()


class Endpoint:
    """One chat-completions endpoint; thread-safe (one pooled HTTP client)."""

    def __init__(self, base_url: str, key: str = "", *, timeout: float = 120.0, max_retries: int = 3,
                 first_backoff: float = FIRST_BACKOFF_SECONDS, sleep: Callable[[float], None] = time.sleep):
        if not base_url.startswith(("http://", "https://")):
            raise InvalidSetting(f"llm_base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.timeout = timeout
        self.max_retries = max_retries
        self.first_backoff = first_backoff
        self.sleep = sleep
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def complete(self, model: str, messages: list[ChatMessage], *, timeout: float | None = None,
                 max_retries: int | None = None) -> str:
        """The assistant's reply text (reasoning `<think>` blocks removed)."""
        body = msgspec.json.encode(_Request(model=model, messages=messages))
        retries = self.max_retries if max_retries is None else max_retries
        for attempt in range(retries + 1):
            last_try = attempt == retries
            try:
                response = self.http.post(self.url, content=body, timeout=timeout or self.timeout,
                                          headers={"Content-Type": "application/json"})
            except httpx.TransportError as exc:
                failure: MemsvcError = LLMUnavailable(
                    f"LLM endpoint {self.url} did not answer ({type(exc).__name__}); check llm_base_url "
                    "and that the server is up", metadata={"model": model})
                wait = None
            else:
                if response.status_code == 200:
                    return _content(response, model, self.url)
                failure = _status_error(response, model, self.url)
                wait = _retry_after(response)
            if not isinstance(failure, LLMUnavailable) or last_try:
                raise failure
            delay = min(MAX_BACKOFF_SECONDS, wait if wait is not None else self._backoff(attempt))
            log.info("llm call failed, retrying", extra={"model": model, "reason": failure.reason,
                                                         "attempt": attempt + 1, "delay_seconds": round(delay, 3)})
            self.sleep(delay)
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> float:
        """Exponential with full jitter, so retrying clients spread out."""
        return random.uniform(0.5, 1.0) * self.first_backoff * (2 ** attempt)


class Model:
    """A named model on an endpoint: the summary role or the decision role."""

    def __init__(self, endpoint: Endpoint, name: str):
        self.endpoint = endpoint
        self.name = name

    def complete(self, system: str, user: str, *, timeout: float | None = None,
                 max_retries: int | None = None) -> str:
        return self.endpoint.complete(self.name, [ChatMessage("system", system), ChatMessage("user", user)],
                                      timeout=timeout, max_retries=max_retries)


def models(settings: Settings, endpoint: Endpoint | None = None) -> tuple[Model | None, Model | None]:
    """(summary model, decision model) from the settings; either is None when not configured."""
    if not (settings.summary_model or settings.decision_model):
        return None, None
    if endpoint is None:
        if not settings.llm_base_url:
            raise InvalidSetting("summary_model/decision_model need llm_base_url (e.g. http://127.0.0.1:11434/v1)")
        endpoint = Endpoint(settings.llm_base_url, api_key(settings), timeout=settings.llm_timeout_seconds,
                            max_retries=settings.llm_max_retries)
    summary = Model(endpoint, settings.summary_model) if settings.summary_model else None
    decision = Model(endpoint, settings.decision_model) if settings.decision_model else None
    return summary, decision


@functools.cache
def prompt(name: str) -> str:
    """A prompt file of memsvc/prompts/, e.g. `summary.v1.md`, less its header comment."""
    text = (resources.files("memsvc") / "prompts" / name).read_text(encoding="utf-8")
    return _HEADER.sub("", text, count=1)


def fill(template: str, **values: str) -> str:
    """Replace `{{name}}` markers; plain str.format would trip over the JSON in prompts."""
    for name, value in values.items():
        template = template.replace("{{" + name + "}}", value)
    return template


def _content(response: httpx.Response, model: str, url: str) -> str:
    try:
        reply = _decode_reply(response.content)
        text = reply.choices[0].message.content
    except (msgspec.DecodeError, IndexError):
        text = None
    if text is None:
        raise LLMBadResponse(f"LLM endpoint {url} answered 200 without a chat completion for model {model}; "
                             "is llm_base_url an OpenAI-compatible /v1 base?", metadata={"model": model})
    return _THINKING.sub("", text).strip()


def _status_error(response: httpx.Response, model: str, url: str) -> MemsvcError:
    code = response.status_code
    detail = _provider_detail(response)
    where = f"LLM endpoint {url} answered HTTP {code} for model {model}" + (f": {detail}" if detail else "")
    metadata = {"model": model, "http_status": str(code)}
    if code >= 500 or code in RETRYABLE_STATUS:
        return LLMUnavailable(where, metadata=metadata)
    if code in (401, 403):
        return LLMRejected(f"{where}; check llm_api_key_file or {API_KEY_ENV}", reason="LLM_AUTH_FAILED",
                           metadata=metadata)
    if code == 404:
        return LLMRejected(f"{where}; check llm_base_url and the model name", reason="LLM_NOT_FOUND",
                           metadata=metadata)
    return LLMRejected(where, metadata=metadata)


def _provider_detail(response: httpx.Response) -> str:
    """The provider's own error message, short: it tells a person what to fix."""
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:PROVIDER_DETAIL_CHARS] if message else ""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
