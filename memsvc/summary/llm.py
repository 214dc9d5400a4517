"""LLMs over an OpenAI-compatible chat-completions HTTP API, and the prompt
files they are given.

Owns the chat-completions call (`POST {llm_base_url}/chat/completions`) on a
core.http Provider (which owns timeouts and retries), the API key setting
(`llm_api_key_file` or MEMSVC_LLM_API_KEY), turning every failure into a
domain error with a stable reason, and the versioned prompt files in
memsvc/summary/prompts/. Must never log or echo the API key or conversation
text, and never decide what to ask: callers do.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import FailedPrecondition, InvalidSetting, MemsvcError, Unavailable
from memsvc.core.http import Provider, ProviderFailure
from memsvc.core.reasons import Reason
from memsvc.core.secrets import read_secret
from memsvc.runtime import tracing

API_KEY_ENV = "MEMSVC_LLM_API_KEY"
COMPLETIONS_PATH = "/chat/completions"
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

    reason = Reason.LLM_UNAVAILABLE


class LLMRejected(FailedPrecondition):
    """The endpoint refused the request (4xx): a setting (key, model, URL) needs fixing."""

    reason = Reason.LLM_REQUEST_REJECTED


class LLMBadResponse(MemsvcError):
    """The endpoint answered 200 with something that is not a chat completion."""

    reason = Reason.LLM_BAD_RESPONSE


def api_key(settings: Settings, environ: dict[str, str] | None = None) -> str:
    """The key from llm_api_key_file, else MEMSVC_LLM_API_KEY, else none (local servers need none)."""
    return read_secret("llm_api_key_file", settings.llm_api_key_file, API_KEY_ENV, environ)


class Endpoint:
    """The chat-completions API of one provider; thread-safe."""

    def __init__(self, provider: Provider):
        self.provider = provider
        self.url = provider.base_url + COMPLETIONS_PATH

    def close(self) -> None:
        self.provider.close()

    def complete(self, model: str, messages: list[ChatMessage], *, timeout: float | None = None,
                 max_retries: int | None = None) -> str:
        """The assistant's reply text (reasoning `<think>` blocks removed)."""
        body = msgspec.json.encode(_Request(model=model, messages=messages))
        try:
            with tracing.span("llm.complete", **{"llm.model": model}):
                reply = self.provider.post_json(COMPLETIONS_PATH, body, timeout=timeout, max_retries=max_retries)
        except ProviderFailure as failure:
            raise _failed(failure, model) from None
        return _content(reply, model, self.url)


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
        endpoint = Endpoint(Provider(settings.llm_base_url, api_key(settings), setting="llm_base_url",
                                     timeout=settings.llm_timeout_seconds, max_retries=settings.llm_max_retries))
    summary = Model(endpoint, settings.summary_model) if settings.summary_model else None
    decision = Model(endpoint, settings.decision_model) if settings.decision_model else None
    return summary, decision


@functools.cache
def prompt(name: str) -> str:
    """A prompt file of memsvc/summary/prompts/, e.g. `summary.v1.md`, less its header comment."""
    text = (resources.files("memsvc.summary") / "prompts" / name).read_text(encoding="utf-8")
    return _HEADER.sub("", text, count=1)


def fill(template: str, **values: str) -> str:
    """Replace `{{name}}` markers; plain str.format would trip over the JSON in prompts."""
    for name, value in values.items():
        template = template.replace("{{" + name + "}}", value)
    return template


def shortened(text: str, max_chars: int) -> str:
    """`text` for a prompt: cut in the middle past `max_chars`, with a marker saying how much went."""
    if len(text) <= max_chars:
        return text
    marker = f" [... {len(text) - max_chars} characters left out ...] "
    keep = max(0, max_chars - len(marker))
    return text[:keep - keep // 2] + marker + text[len(text) - keep // 2:]


def _content(body: bytes, model: str, url: str) -> str:
    try:
        text = _decode_reply(body).choices[0].message.content
    except (msgspec.DecodeError, IndexError):
        text = None
    if text is None:
        raise LLMBadResponse(f"LLM endpoint {url} answered 200 without a chat completion for model {model}; "
                             "is llm_base_url an OpenAI-compatible /v1 base?", metadata={"model": model})
    return _THINKING.sub("", text).strip()


def _failed(failure: ProviderFailure, model: str) -> MemsvcError:
    code = failure.status
    if code == 0:
        return LLMUnavailable(f"LLM endpoint {failure.url} did not answer ({failure.detail}); check llm_base_url "
                              "and that the server is up", metadata={"model": model})
    where = f"LLM endpoint {failure.url} answered HTTP {code} for model {model}" + (
        f": {failure.detail}" if failure.detail else "")
    metadata = {"model": model, "http_status": str(code)}
    if failure.transient:
        return LLMUnavailable(where, metadata=metadata)
    if code in (401, 403):
        return LLMRejected(f"{where}; check llm_api_key_file or {API_KEY_ENV}", reason=Reason.LLM_AUTH_FAILED,
                           metadata=metadata)
    if code == 404:
        return LLMRejected(f"{where}; check llm_base_url and the model name", reason=Reason.LLM_NOT_FOUND,
                           metadata=metadata)
    return LLMRejected(where, metadata=metadata)
