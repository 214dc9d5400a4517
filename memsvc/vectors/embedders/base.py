"""What every embedder is: `name`, `dimension` and `vectors(texts)`.

Owns the interface and the unit-length rule: every vector is L2 normalised,
so cosine similarity is a dot product (a text with no features gives the zero
vector). Must never know a provider.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memsvc.core.errors import Unavailable
from memsvc.core.reasons import Reason


class EmbeddingFailed(Unavailable):
    """The provider did not answer usefully; the caller retries later."""

    reason = Reason.EMBEDDER_UNAVAILABLE


class Embedder:
    name: str
    "Identity of the vector space: provider, model and version. Recorded beside every index."
    instant = False
    "True when a query embeds in well under a millisecond, with no I/O: callers need no thread for it."

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
        """(len(texts), dimension) float32, rows of unit length (or zero).

        `max_retries` bounds retries of a remote provider (None: its default).
        """
        raise NotImplementedError

    def warm(self) -> None:
        """Load what the first call would (model weights); called off the request path."""


def unit_length(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit
