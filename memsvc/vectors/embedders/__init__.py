"""Embedders: text in, unit vectors out, chosen by the `embedder` setting.

One module per provider: `minilm` (the default: all-MiniLM-L6-v2 run by
numpy, `bert`, from weights a package ships), `builtin` (feature hashing, no
model), `local` (a sentence-transformers model on disk, with torch) and
`openai` (any OpenAI-compatible `/v1/embeddings` endpoint); `base` is the
interface they share. This module
picks one from the settings. Must never store vectors or know about sessions.
"""

from __future__ import annotations

from memsvc.core.config import Settings
from memsvc.core.errors import InvalidSetting
from memsvc.core.http import Provider
from memsvc.core.secrets import read_secret
from memsvc.vectors.embedders.base import Embedder
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.embedders.local import LocalModelEmbedder
from memsvc.vectors.embedders.minilm import MiniLMEmbedder
from memsvc.vectors.embedders.openai import HttpEmbedder

API_KEY_ENV = "MEMSVC_EMBEDDING_API_KEY"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


def from_settings(settings: Settings) -> Embedder:
    """The embedder the settings name; raises InvalidSetting before the server starts."""
    if settings.embedder == "all-minilm-l6-v2":
        return MiniLMEmbedder()
    if settings.embedder == "builtin":
        return BuiltinEmbedder(settings.embedding_dimensions)
    if settings.embedder == "sentence-transformers":
        return LocalModelEmbedder(settings.embedding_model)
    if not settings.embedding_base_url:
        raise InvalidSetting("embedder openai needs embedding_base_url (e.g. https://api.openai.com/v1)")
    key = read_secret("embedding_api_key_file", settings.embedding_api_key_file, API_KEY_ENV)
    provider = Provider(settings.embedding_base_url, key, setting="embedding_base_url",
                        timeout=settings.embedding_timeout_seconds, max_retries=HttpEmbedder.MAX_RETRIES,
                        first_backoff=HttpEmbedder.FIRST_BACKOFF_SECONDS)
    return HttpEmbedder(provider, settings.embedding_model or DEFAULT_OPENAI_MODEL, settings.embedding_dimensions)
