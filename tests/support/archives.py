"""Archives as older memsvc versions left them on disk, built with the real Tantivy and the schema and
analyzer of their time, for the tests that check a newer server moves them to the current index."""

from __future__ import annotations

from pathlib import Path

import tantivy

from memsvc.archive import keywords, reindex
from memsvc.core.records import Record

FIRST_PATTERN = f"[{keywords.SCRIPTS_WITHOUT_SPACES}]|[^\\W{keywords.SCRIPTS_WITHOUT_SPACES}]+"
FIRST_ANALYZER = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(FIRST_PATTERN)).filter(
    tantivy.Filter.lowercase()).build()
"What versions 1 and 2 indexed with: lowercased tokens, no stemming, underscores inside words."

PAYLOAD = '{"tool_calls": [{"id": "call_1", "args": {"city": "Z\\u00fcrich", "note": "\u6c99\u76d2"}}]}  '
"Exact bytes: an escape, raw CJK and trailing spaces, which a re-encoding of the JSON would change."

FRAMEWORK = [
    Record(id=1, role="system", content="Be brief.", send_at=101),
    Record(id=2, role="user", content="We deployed the fixes to staging", send_at=102, sender="ann"),
    Record(id=3, role="assistant", content="get_weather(Zurich)", send_at=103, payload=PAYLOAD),
    Record(id=4, role="tool", content="sunny", send_at=104, payload='"sunny"'),
    Record(id=5, role="user", content="沙盒測試 tomorrow", send_at=105),
]


def _schema(version: int) -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("session", tokenizer_name="raw", stored=True)
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("send_at", stored=True, indexed=True, fast=True)
    builder.add_text_field("role", tokenizer_name="raw", stored=True)
    builder.add_text_field("sender", tokenizer_name="raw", stored=True)
    builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    if version >= 2:
        builder.add_bytes_field("payload", stored=True)
    return builder.build()


def old_index(store: Path, version: int, sessions: dict[str, list[Record]],
              deleted: dict[str, list[int]] | None = None) -> Path:
    """`.store/archive/` as memsvc of `version` (1, 2 or 3) wrote it, holding these records; `deleted` ones
    were then deleted (DeleteMessages, version 2 on). Returns the index directory."""
    directory = reindex.index_dir(store / "archive", version)
    directory.mkdir(parents=True)
    schema = _schema(version)
    index = tantivy.Index(schema, path=str(directory))  # Tantivy's default layout of stored documents
    index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer() if version >= 3 else FIRST_ANALYZER)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for session_id, records in sessions.items():
        for record in records:
            document = tantivy.Document()
            document.add_text("session", session_id)
            document.add_unsigned("id", record.id)
            document.add_integer("send_at", record.send_at)
            document.add_text("role", record.role)
            document.add_text("sender", record.sender)
            document.add_text("content", record.content)
            if record.payload and version >= 2:
                document.add_bytes("payload", record.payload.encode())
            writer.add_document(document)
    writer.commit()
    for session_id, ids in (deleted or {}).items():
        writer.delete_documents_by_query(tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "session", session_id)),
            (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "id", ids))]))
    writer.commit()
    writer.wait_merging_threads()
    return directory


def texts(*contents: str) -> list[Record]:
    """Users' messages with ids and send times 1, 2, ..."""
    return [Record(id=n, role="user", content=text, send_at=n) for n, text in enumerate(contents, start=1)]


def numbered(count: int, text: str = "archived sandbox note {n}") -> list[Record]:
    """`count` messages, users' and assistants' by turns, with ids and send times 1, 2, ..."""
    return [Record(id=n, role="user" if n % 2 else "assistant", content=text.format(n=n), send_at=n)
            for n in range(1, count + 1)]


def old_archive(store: Path, messages: dict[str, list[str]], version: int = 1) -> Path:
    """An archive of `version` holding users' messages with these texts, in each session."""
    return old_index(store, version, {session: texts(*contents) for session, contents in messages.items()})
