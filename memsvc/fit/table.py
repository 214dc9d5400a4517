"""The model table: each model's context window, keyed by vendor and model.

Owns the table's JSON format, which is the reference agent's so that its
live table can be used as it is:

    {"openai": {"gpt-4o": {"in": 128000, "out": 16384}}, "anthropic": {...}}

(`in` is the context window in tokens; other fields are ignored), vendor
aliases (`claude` is `anthropic`, `gemini` is `google`...), the /models
list of an OpenAI-compatible endpoint (`context_length` or `max_model_len`
per model id), merging them (a fetched table over the shipped one; the
endpoint only for models neither lists) and finding a model. Must never
fetch or touch the disk: refresh.py does.

A lookup tries, in order: the vendor's exact model; the exact model under
any vendor (so a model served by `ollama` or `vllm` finds its maker's
entry; `vendor/model` names split too); the endpoint's list; the longest
table entry the model name starts with, up to a `-`, `:` or `@`
(`gpt-4o-2024-08-06` is `gpt-4o`, `qwen2.5:7b` is `qwen2.5`); else the
fallback window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

WindowSource = Literal["shipped", "fetched", "endpoint", "fallback", "request"]
VENDOR_ALIASES = {"claude": "anthropic", "gemini": "google", "grok": "xai", "x-ai": "xai", "mistralai": "mistral",
                  "codex": "openai", "meta-llama": "meta", "alibaba": "qwen"}
_SEPARATORS = "-:@"
Entries = dict[tuple[str, str], int]
"(vendor, model) -> context window, both names normalized."


class Window(msgspec.Struct, frozen=True):
    tokens: int
    source: WindowSource
    entry: str = ""
    "The table entry, `vendor/model`, or the endpoint's model id; empty for the fallback and the request."


class InvalidTable(ValueError):
    pass


def vendor_name(vendor: str) -> str:
    name = vendor.strip().lower()
    return VENDOR_ALIASES.get(name, name)


def parse_table(body: bytes) -> Entries:
    """A table document's entries; entries without a positive `in` are skipped, a document with none is invalid."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidTable(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidTable("the table is not a JSON object of vendors")
    entries: Entries = {}
    for vendor, models in data.items():
        if not isinstance(models, dict):
            continue
        for model, limits in models.items():
            window = limits.get("in") if isinstance(limits, dict) else None
            if isinstance(window, int) and not isinstance(window, bool) and window > 0:
                entries[vendor_name(vendor), model.strip().lower()] = window
    if not entries:
        raise InvalidTable('the table lists no model with a positive "in" window')
    return entries


def parse_models_list(body: bytes) -> dict[str, int]:
    """An OpenAI-compatible /models reply: model id -> context_length (OpenRouter) or max_model_len (vLLM)."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidTable(f"not JSON: {exc}") from None
    listed = data.get("data") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise InvalidTable('a /models reply holds its models in "data"')
    windows = {}
    for model in listed:
        if not isinstance(model, dict) or not isinstance(model.get("id"), str):
            continue
        window = _first_int(model, "context_length", "max_model_len", "context_window")
        if window:
            windows[model["id"].strip().lower()] = window
    if not windows:
        raise InvalidTable("no model of the list reports context_length or max_model_len")
    return windows


def _first_int(data: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


class Table:
    """An immutable snapshot of everything known; lookups never block."""

    def __init__(self, shipped: Entries, fetched: Entries | None = None, endpoint: dict[str, int] | None = None):
        self.entries: dict[tuple[str, str], tuple[int, WindowSource]] = {
            key: (window, "shipped") for key, window in shipped.items()}
        self.entries.update({key: (window, "fetched") for key, window in (fetched or {}).items()})
        self.by_model: dict[str, tuple[str, int, WindowSource]] = {}
        for (vendor, model), (window, source) in sorted(self.entries.items()):
            self.by_model.setdefault(model, (vendor, window, source))
        self.endpoint = dict(endpoint or {})

    def window(self, vendor: str, model: str, fallback: int) -> Window:
        vendor, model = vendor_name(vendor), model.strip().lower()
        names = [(vendor, model)]
        if "/" in model:
            prefix, rest = model.split("/", 1)
            names.append((vendor_name(prefix), rest))
        for wanted in (self._exact, self._listed, self._prefixed):
            for candidate_vendor, candidate in names:
                found = wanted(candidate_vendor, candidate, model)
                if found is not None:
                    return found
        return Window(fallback, "fallback")

    def _exact(self, vendor: str, model: str, full: str) -> Window | None:
        found = self.entries.get((vendor, model))
        if found is not None:
            return Window(found[0], found[1], f"{vendor}/{model}")
        listed = self.by_model.get(model)
        if listed is not None:
            return Window(listed[1], listed[2], f"{listed[0]}/{model}")
        return None

    def _listed(self, vendor: str, model: str, full: str) -> Window | None:
        for name in (full, model, f"{vendor}/{model}"):
            if name in self.endpoint:
                return Window(self.endpoint[name], "endpoint", name)
        return None

    def _prefixed(self, vendor: str, model: str, full: str) -> Window | None:
        for cut in range(len(model) - 1, 0, -1):
            if model[cut] in _SEPARATORS:
                found = self._exact(vendor, model[:cut], full)
                if found is not None:
                    return found
        return None
