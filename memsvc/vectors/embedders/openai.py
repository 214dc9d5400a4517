"""Embeddings from an OpenAI-compatible `POST {base_url}/embeddings` endpoint.

Owns the request and reply shapes, batching, cutting overlong inputs, and
turning the provider's failures into EmbeddingFailed (retries and timeouts
are core.http's). Must never log the key or the texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from memsvc.core.errors import FailedPrecondition
from memsvc.core.http import Provider, ProviderFailure
from memsvc.core.reasons import Reason
from memsvc.vectors.embedders.base import Embedder, EmbeddingFailed, unit_length

EMBEDDINGS_PATH = "/embeddings"


class _Item(msgspec.Struct):
    index: int
    embedding: list[float]


class _Reply(msgspec.Struct):
    data: list[_Item]


_decode_reply = msgspec.json.Decoder(_Reply).decode


class HttpEmbedder(Embedder):
    """POST {base_url}/embeddings in batches.

    Texts longer than `max_chars` are cut: providers reject inputs past their
    token limit, and the head of a message says what it is about.
    """

    MAX_RETRIES = 3
    FIRST_BACKOFF_SECONDS = 0.5

    def __init__(self, provider: Provider, model: str, dimension: int, *, batch_size: int = 64,
                 max_chars: int = 6000):
        self.provider = provider
        self.url = provider.base_url + EMBEDDINGS_PATH
        self.model = model
        self.name = f"openai:{model}"
        self._dimension = dimension
        self.batch_size, self.max_chars = batch_size, max_chars

    @property
    def dimension(self) -> int:
        return self._dimension

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
        batches = [self._batch(texts[start:start + self.batch_size], max_retries)
                   for start in range(0, len(texts), self.batch_size)]
        if not batches:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return unit_length(np.concatenate(batches))

    def _batch(self, texts: Sequence[str], max_retries: int | None) -> np.ndarray:
        body = msgspec.json.encode({"model": self.model, "input": [text[:self.max_chars] for text in texts],
                                    "dimensions": self._dimension, "encoding_format": "float"})
        try:
            reply = self.provider.post_json(EMBEDDINGS_PATH, body, max_retries=max_retries)
        except ProviderFailure as failure:
            problem = f"HTTP {failure.status}" if failure.status else failure.detail
            if not failure.transient:
                raise EmbeddingFailed(f"the embedding endpoint refused the request ({problem})",
                                      reason=Reason.EMBEDDER_REJECTED) from None
            raise EmbeddingFailed(f"the embedding endpoint failed (last: {problem})") from None
        return self._parse(reply, len(texts))

    def _parse(self, payload: bytes, expected: int) -> np.ndarray:
        try:
            items = sorted(_decode_reply(payload).data, key=lambda item: item.index)
            matrix = np.asarray([item.embedding for item in items], dtype=np.float32)
        except (msgspec.DecodeError, ValueError):
            matrix = np.zeros(0, dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != expected:
            raise EmbeddingFailed("the embedding endpoint's reply does not match the request")
        if matrix.shape[1] != self._dimension:
            raise FailedPrecondition(
                f"the embedding endpoint returned {matrix.shape[1]} dimensions; embedding_dimensions is "
                f"{self._dimension}: set it to the model's dimension", reason=Reason.EMBEDDING_DIMENSION_UNEXPECTED)
        return matrix
