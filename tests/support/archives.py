"""Archives as older memsvc versions left them on disk, for the re-index tests."""

from pathlib import Path

import tantivy

from memsvc.archive import keywords
from memsvc.archive.index import _schema

FIRST_PATTERN = f"[{keywords.SCRIPTS_WITHOUT_SPACES}]|[^\\W{keywords.SCRIPTS_WITHOUT_SPACES}]+"
FIRST_ANALYZER = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(FIRST_PATTERN)).filter(
    tantivy.Filter.lowercase()).build()
"What version 1 indexed with: the archive as existing data directories hold it."


def old_archive(store: Path, messages: dict[str, list[str]]) -> None:
    index_dir = store / "archive" / "index"
    index_dir.mkdir(parents=True)
    index = tantivy.Index(_schema(), path=str(index_dir))
    index.register_tokenizer(keywords.ANALYZER_NAME, FIRST_ANALYZER)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for session, texts in messages.items():
        for id_, text in enumerate(texts, start=1):
            document = tantivy.Document()
            document.add_text("session", session)
            document.add_unsigned("id", id_)
            document.add_integer("send_at", id_)
            document.add_text("role", "user")
            document.add_text("sender", "")
            document.add_text("content", text)
            writer.add_document(document)
    writer.commit()
    writer.wait_merging_threads()
