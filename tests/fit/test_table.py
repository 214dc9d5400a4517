"""The model table's format, merging and lookup order."""

from __future__ import annotations

import json

import pytest

from memsvc.fit.refresh import shipped_entries
from memsvc.fit.table import InvalidTable, Table, Window, parse_models_list, parse_table

FALLBACK = 128000
_w = Window


def document(data: object) -> bytes:
    return json.dumps(data).encode()


def test_the_reference_format_parses_with_aliases_and_skips_bad_entries():
    entries = parse_table(document({
        "claude": {"Claude-X": {"in": 200000, "out": 8192}}, "gemini": {"g-1": {"in": 1048576}},
        "openai": {"bad": {"in": "lots"}, "zero": {"in": 0}, "flag": {"in": True}, "no-in": {"out": 5}},
        "nonsense": "not a vendor"}))
    assert entries == {("anthropic", "claude-x"): 200000, ("google", "g-1"): 1048576}


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"openai": {"gpt-4o": {"out": 1}}}', b"{}"])
def test_a_document_that_lists_no_window_is_invalid(body):
    with pytest.raises(InvalidTable):
        parse_table(body)


def test_a_models_list_reads_context_length_or_max_model_len():
    listed = parse_models_list(document({"data": [
        {"id": "A/B", "max_model_len": 4096}, {"id": "c", "context_length": 65536}, {"id": "d"}, "junk"]}))
    assert listed == {"a/b": 4096, "c": 65536}
    with pytest.raises(InvalidTable):
        parse_models_list(document({"data": [{"id": "d"}]}))
    with pytest.raises(InvalidTable):
        parse_models_list(document({"models": []}))


def test_the_shipped_table_holds_the_well_known_models():
    entries = shipped_entries()
    assert entries["openai", "gpt-4o"] == 128000 and entries["anthropic", "claude-3-5-sonnet"] == 200000
    assert all(window >= 8192 for window in entries.values())


def test_lookups_go_exact_then_any_vendor_then_endpoint_then_prefix_then_fallback():
    table = Table({("openai", "gpt-4o"): 128000, ("openai", "gpt-4"): 8192, ("qwen", "qwen2.5"): 32768},
                  fetched={("openai", "gpt-4o"): 111111, ("acme", "rocket"): 5000},
                  endpoint={"qwen2.5:7b": 16384, "vendor/thing": 7777})
    assert table.window("OpenAI", "GPT-4o", FALLBACK) == _w(111111, "fetched", "openai/gpt-4o")
    assert table.window("openai", "gpt-4", FALLBACK) == _w(8192, "shipped", "openai/gpt-4")
    assert table.window("azure", "gpt-4", FALLBACK) == _w(8192, "shipped", "openai/gpt-4")  # any vendor
    assert table.window("openrouter", "acme/rocket", FALLBACK) == _w(5000, "fetched", "acme/rocket")
    assert table.window("ollama", "qwen2.5:7b", FALLBACK) == _w(16384, "endpoint", "qwen2.5:7b")  # before prefix
    assert table.window("ollama", "qwen2.5:14b", FALLBACK) == _w(32768, "shipped", "qwen/qwen2.5")
    assert table.window("vendor", "thing", FALLBACK) == _w(7777, "endpoint", "vendor/thing")
    assert table.window("openai", "gpt-4o-2024-08-06", FALLBACK) == _w(111111, "fetched", "openai/gpt-4o")
    assert table.window("openai", "gpt-4-0613", FALLBACK) == _w(8192, "shipped", "openai/gpt-4")
    assert table.window("openai", "gpt-4.1", FALLBACK) == _w(FALLBACK, "fallback", "")  # "." is no separator
    assert table.window("", "unheard-of", 4242) == _w(4242, "fallback", "")
