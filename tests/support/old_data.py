"""Data directories as older memsvc versions wrote them, built with the real libraries, for the
tests that check a newer server keeps working over them."""

from __future__ import annotations

from pathlib import Path

import tantivy

from memsvc.archive import keywords


def format_1(store: Path, sessions: dict[str, int], text: str = "archived sandbox note {n}") -> Path:
    """An archive as memsvc wrote it before payloads: `index/` with the schema of that time."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("session", tokenizer_name="raw", stored=True)
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("send_at", stored=True, indexed=True, fast=True)
    builder.add_text_field("role", tokenizer_name="raw", stored=True)
    builder.add_text_field("sender", tokenizer_name="raw", stored=True)
    builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    directory = store / "archive" / "index"
    directory.mkdir(parents=True)
    index = tantivy.Index(builder.build(), path=str(directory))
    index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
    writer = index.writer(heap_size=64 * 1024 * 1024, num_threads=1)
    for session_id, count in sessions.items():
        for n in range(1, count + 1):
            document = tantivy.Document()
            document.add_text("session", session_id)
            document.add_unsigned("id", n)
            document.add_integer("send_at", n)
            document.add_text("role", "user" if n % 2 else "assistant")
            document.add_text("sender", "")
            document.add_text("content", text.format(n=n))
            writer.add_document(document)
    writer.commit()
    writer.wait_merging_threads()
    return directory
