"""Reranking fused candidates with a rerank model behind an HTTP endpoint.

Owns the `reranker` setting's providers: `none` (the fused order stands) and
`http`, any `POST {reranker_base_url}/rerank` of the Cohere / Jina / vLLM
shape (`{model, query, documents, top_n}` in, `{results: [{index,
relevance_score}]}` out). A rerank is one request, never retried, bounded by
`reranker_timeout_seconds`: when it fails or is late, the caller keeps the
fused order. Must never block an Append (only searches call it, off the event
loop) and never log the key, the query or the documents.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidSetting
from memsvc.core.http import Provider, ProviderFailure
from memsvc.core.secrets import read_secret
from memsvc.runtime import tracing

log = logging.getLogger(__name__)

RERANK_PATH = "/rerank"
API_KEY_ENV = "MEMSVC_RERANKER_API_KEY"
MAX_DOCUMENT_CHARS = 2000
"Longer messages are cut: rerank models read a few hundred tokens, and a message's head says what it is about."


class Reranker:
    """The `none` reranker: keeps the fused order."""

    name = "none"

    @property
    def enabled(self) -> bool:
        return False

    def scores(self, query: str, documents: Sequence[str]) -> list[float] | None:
        """One relevance score per document (higher first), or None to keep the given order."""
        return None

    def close(self) -> None:
        """Release the connection pool."""


class _Result(msgspec.Struct):
    index: int
    relevance_score: float


class _Reply(msgspec.Struct):
    results: list[_Result]


_decode_reply = msgspec.json.Decoder(_Reply).decode


class HttpReranker(Reranker):
    def __init__(self, provider: Provider, model: str):
        self.provider = provider
        self.model = model
        self.name = f"http:{model}" if model else "http"

    @property
    def enabled(self) -> bool:
        return True

    @tracing.traced("search.rerank")
    def scores(self, query: str, documents: Sequence[str]) -> list[float] | None:
        if not documents:
            return []
        body = {"query": query, "documents": [text[:MAX_DOCUMENT_CHARS] for text in documents],
                "top_n": len(documents)}
        if self.model:
            body["model"] = self.model
        try:
            reply = _decode_reply(self.provider.post_json(RERANK_PATH, msgspec.json.encode(body), max_retries=0))
        except ProviderFailure as exc:
            log.warning("reranker failed; keeping the fused order", extra={"status": exc.status,
                                                                          "detail": exc.detail})
            return None
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("reranker reply unreadable; keeping the fused order")
            return None
        found: list[float | None] = [None] * len(documents)
        for result in reply.results:
            if 0 <= result.index < len(documents):
                found[result.index] = result.relevance_score
        if any(score is None for score in found):
            log.warning("reranker left documents unscored; keeping the fused order")
            return None
        return [score for score in found if score is not None]

    def close(self) -> None:
        self.provider.close()


def from_settings(settings: Settings) -> Reranker:
    """The reranker the settings name; raises InvalidSetting before the server starts."""
    if settings.reranker == "none":
        return Reranker()
    if not settings.reranker_base_url:
        raise InvalidSetting("reranker http needs reranker_base_url (e.g. http://127.0.0.1:8000/v1)")
    key = read_secret("reranker_api_key_file", settings.reranker_api_key_file, API_KEY_ENV)
    provider = Provider(settings.reranker_base_url, key, setting="reranker_base_url",
                        timeout=settings.reranker_timeout_seconds, max_retries=0)
    return HttpReranker(provider, settings.reranker_model)
