"""Keyword search over 1,000,000 archived messages: memsvc's Tantivy archive
against SQLite FTS5 (stdlib sqlite3) on the same corpus and the same queries,
side by side in one run; then Search end to end through a real server against
the floor (a health Check on the same server).

    make bench-archive          (ARGS="--messages 100000" for a quick run)
    .venv/bin/python benchmarks/archive.py [--messages 1000000] [--sessions 1000] [--queries 1000]

The corpus (benchmarks/corpus.py, seeded, so every run indexes the same
text): --sessions agent conversations of --messages/--sessions turns, mostly
English with Chinese and Japanese sessions mixed in (~13% CJK messages),
chat-turn lengths. Both engines ingest the messages in send order, sessions
interleaved as a live server would see them.

The archive is built through memsvc.archive.Archive (its writer thread, one
commit at the end) in `<data>/.store/archive/`, holding every message as the
dual write leaves it; each session's last 16 messages are also in its
history.json, so searches cover the archived ids below them.

FTS5, made to mean what a memsvc keyword means: the text is pre-split with
memsvc's own analyzer (keywords.tokenize: one token per CJK character,
lowercased and stemmed word runs) and the tokens joined by spaces are
indexed by unicode61 (remove_diacritics 0, `_` a token character), so both
engines hold the same terms. Both run the same ranked query, an OR of the
query's terms (keywords.parse: stems, stop words dropped, CJK runs of up to
two characters as phrases `"沙 盒"`, longer ones as their character pairs
plus the whole run); the session is an indexed column ANDed into the MATCH
(so FTS5 skips through doclists instead of filtering every match of the
corpus), the id bound and time range are checked on a plain `messages`
table joined by rowid, which also holds the text once (the FTS5 table is
contentless), ORDER BY bm25 LIMIT 10. The trigram tokenizer was not used: it
cannot match CJK words shorter than 3 characters. Both engines read their
files through mmap.

Queries are drawn from archived messages of their session (English words as
written, CJK words, both; a third with a time range). Each is
timed once per engine, the engines alternating which goes first, after
untimed warm-up queries; then the whole hit sets (no limit) of both engines
are compared.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import msgspec
from common import ServerProcess, percentiles, save
from corpus import CJK_RUN, SEED, conversation, draw_queries, session_name
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.archive import keywords
from memsvc.archive.index import Archive
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.window import history
from memsvc_client.v1 import memory_pb2 as pb
from memsvc_client.v1 import memory_pb2_grpc

RECENT = 16
"Messages of each session also kept in history.json."
LIMIT = 10


class Query(msgspec.Struct, frozen=True):
    kind: str
    session: int
    text: str
    below_id: int
    "The first id in the session's history.json: both engines search the archived ids below it."
    since: int
    until: int
    words: keywords.KeywordQuery
    "The text parsed once, outside the timing, as the server parses it before asking the archive."
    match: str
    "The same query for FTS5."


def make_queries(sessions: list[list[Record]], count: int, seed: int) -> list[Query]:
    made = []
    for drawn in draw_queries(sessions, count, seed, skip_last=RECENT):
        words = keywords.parse(drawn.text)
        made.append(Query(drawn.kind, drawn.session, drawn.text, sessions[drawn.session][-RECENT].id, drawn.since,
                          drawn.until or NO_UPPER_BOUND, words, fts_match(session_name(drawn.session), words)))
    return made


# -- SQLite FTS5 -----------------------------------------------------------------

FTS_SCHEMA = """
CREATE TABLE messages(rowid INTEGER PRIMARY KEY, session TEXT, id INTEGER, send_at INTEGER, role TEXT,
                      sender TEXT, content TEXT);
CREATE VIRTUAL TABLE messages_fts USING fts5(session, body, content='',
                                             tokenize="unicode61 remove_diacritics 0 tokenchars '_'");
"""
FTS_QUERY = """
SELECT m.id, m.role, m.content, m.send_at, m.sender, bm25(messages_fts, 0.0, 1.0) AS score
FROM messages_fts JOIN messages AS m ON m.rowid = messages_fts.rowid
WHERE messages_fts MATCH ? AND m.id < ? AND m.send_at >= ? AND m.send_at < ?
ORDER BY score LIMIT ?
"""


def fts_match(session_id: str, query: keywords.KeywordQuery) -> str:
    """The FTS5 query meaning what `query` means to memsvc, in one session: required terms ANDed, the others ORed."""
    def phrase(term: keywords.Term) -> str:
        return 'body:"' + " ".join(term.tokens) + '"'

    clauses = [f'session:"{session_id}"', *map(phrase, query.required)]
    if query.optional and not query.required:
        clauses.append("(" + " OR ".join(map(phrase, query.optional)) + ")")
    return " AND ".join(clauses)


def build_fts(path: Path, arrival: list[tuple[int, Record]]) -> dict[str, float]:
    started = time.perf_counter()
    bodies = [" ".join(keywords.tokenize(record.content)) for _, record in arrival]
    split = time.perf_counter()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(FTS_SCHEMA)
    with connection:
        for rowid, ((session, record), body) in enumerate(zip(arrival, bodies, strict=True), start=1):
            name = session_name(session)
            connection.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (rowid, name, record.id, record.send_at, record.role, record.sender, record.content))
            connection.execute("INSERT INTO messages_fts(rowid, session, body) VALUES (?, ?, ?)", (rowid, name, body))
    inserted = time.perf_counter()
    with connection:
        connection.execute("INSERT INTO messages_fts(messages_fts) VALUES('optimize')")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    done = time.perf_counter()
    return {"pre_split_s": split - started, "insert_s": inserted - split, "optimize_s": done - inserted,
            "total_s": done - started}


def open_fts(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA mmap_size=8589934592")
    connection.execute("PRAGMA cache_size=-65536")
    return connection


def fts_search(connection: sqlite3.Connection, query: Query, limit: int) -> list[tuple[int, float]]:
    rows = connection.execute(FTS_QUERY, (query.match, query.below_id, query.since, query.until, limit)).fetchall()
    return [(row[0], -row[5]) for row in rows]  # FTS5's bm25 is negated: lower is better


def archive_search(archive: Archive, query: Query, limit: int) -> list[tuple[int, float]]:
    hits = archive.search(session_name(query.session), query.words, archive.statistics(query.words), query.below_id,
                          query.since, query.until, limit)
    return [(record.id, score) for record, score in hits]


# -- measuring -------------------------------------------------------------------


def sizes(archive_dir: Path, fts_path: Path) -> dict[str, int]:
    files = [entry for entry in archive_dir.rglob("*") if entry.is_file()]
    stored = sum(entry.stat().st_size for entry in files if entry.suffix == ".store")
    connection = sqlite3.connect(fts_path)
    tables = dict(connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    connection.close()
    fts_index = sum(size for name, size in tables.items() if name.startswith("messages_fts"))
    return {"archive_bytes": sum(entry.stat().st_size for entry in files), "archive_doc_store_bytes": stored,
            "fts5_bytes": fts_path.stat().st_size, "fts5_free_bytes": fts_path.stat().st_size - sum(tables.values()),
            "fts5_index_bytes": fts_index, "fts5_messages_table_bytes": tables.get("messages", 0)}


def agreement(archive: Archive, connection: sqlite3.Connection, queries: list[Query]) -> dict:
    """Whole hit sets (no limit) must be equal; the top 10 may differ where the two BM25s rank differently."""
    same, overlap, mismatches, total_hits = 0, 0.0, [], 0
    for query in queries:
        ours, theirs = archive_search(archive, query, 100_000), fts_search(connection, query, 100_000)
        total_hits += len(ours)
        if {i for i, _ in ours} == {i for i, _ in theirs}:
            same += 1
        elif len(mismatches) < 5:
            mismatches.append({"query": query.text, "session": session_name(query.session), "archive": len(ours),
                               "fts5": len(theirs)})
        top = {i for i, _ in ours[:LIMIT]}
        overlap += len(top & {i for i, _ in theirs[:LIMIT]}) / max(1, len(top))
    return {"queries": len(queries), "same_hit_sets": same, "mean_hits": total_hits / len(queries),
            "top10_overlap": overlap / len(queries), "mismatches": mismatches}


def side_by_side(calls: dict[str, Callable[[Query], object]], queries: list[Query]) -> dict[str, dict]:
    """Each query once per call, alternating which goes first, so noise hits all alike.

    Every query is timed once: repeating one would let a per-word cache in
    either engine answer from memory.
    """
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    kinds: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for position, query in enumerate(queries):
        for name in names if position % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            calls[name](query)
            elapsed = time.perf_counter() - start
            samples[name].append(elapsed)
            kinds[name].setdefault(query.kind, []).append(elapsed)
    results = {name: percentiles(values) for name, values in samples.items()}
    for name in names:
        results[name]["p50_ms_by_kind"] = {kind: round(statistics.median(v) * 1e3, 3)
                                           for kind, v in sorted(kinds[name].items())}
    return results


def settled(data_dir: Path, sessions: set[str], timeout: float = 600) -> float:
    """Wait until every session's messages are embedded (their vector files written); returns the seconds.

    Opening a thousand sessions queues their recent messages for embedding: timed while that runs,
    a search would measure the embedding thread's share of the GIL, not itself."""
    started = time.monotonic()
    vectors = data_dir / ".store" / "vectors"
    while time.monotonic() - started < timeout:
        if all((vectors / name).is_dir() and any((vectors / name).iterdir()) for name in sessions):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def end_to_end(data_dir: Path, queries: list[Query], warmup: list[Query]) -> dict:
    """Search through a real server against a health Check on it, interleaved, both through the
    generated stubs on one channel (like with like: the client package's conversion of replies
    is its own cost, measured in benchmarks/client.py)."""
    server = ServerProcess(data_dir).start()
    found = 0
    try:
        with grpc.insecure_channel(server.tcp) as channel:
            health, memory = health_pb2_grpc.HealthStub(channel), memory_pb2_grpc.MemoryServiceStub(channel)
            check = health_pb2.HealthCheckRequest()

            def search(query: Query) -> None:
                nonlocal found
                bounds = {} if query.until == NO_UPPER_BOUND else {"since_unix_nano": query.since,
                                                             "until_unix_nano": query.until}
                hits = memory.Search(pb.SearchRequest(session_id=session_name(query.session), query=query.text,
                                                      match=pb.MATCH_KEYWORD, limit=LIMIT, **bounds)).hits
                found += any(hit.source == pb.SOURCE_ARCHIVE for hit in hits)

            names = {session_name(query.session) for query in queries + warmup}
            for name in sorted(names):
                # Opening a session queues an archive reconcile and its embeddings; its first search builds
                # the in-memory term index of its recent messages. Both are a session's, once, not a search's.
                memory.GetContext(pb.GetContextRequest(session_id=name))
                memory.Search(pb.SearchRequest(session_id=name, query="warm", match=pb.MATCH_KEYWORD))
            for query in warmup:
                search(query)
                health.Check(check)
            settle_seconds = settled(data_dir, names)
            found = 0
            results = side_by_side({"search": search, "health_check": lambda query: health.Check(check)}, queries)
    finally:
        server.terminate()
    return {**results, "queries_with_archive_hits": found, "settle_seconds": round(settle_seconds, 1)}


CORPUS_MADE = ("seeded agent conversations, user/assistant turns; sessions 78% English, 11% mostly Chinese, "
               "11% mostly Japanese; Zipf English vocabulary with identifiers, file names, numbers, hashes and log "
               "lines; log-normal turn lengths; sessions interleaved in send order")
FTS5_MADE = ("text pre-split by memsvc's analyzer (stems), indexed by unicode61 (remove_diacritics 0, tokenchars _); "
             "contentless FTS5 (session, body) + messages table joined by rowid; MATCH session AND (\"term\" OR "
             "\"c j\" ...), the same OR query as memsvc; id and time bounds on the joined table; ORDER BY bm25 "
             "LIMIT 10; mmap")


def generate(args: argparse.Namespace) -> tuple[list[list[Record]], list[tuple[int, Record]], dict]:
    """Every session's messages, and all of them in send order as (session index, record)."""
    started = time.perf_counter()
    turns = args.messages // args.sessions
    sessions = [conversation(args.seed, index, turns) for index in range(args.sessions)]
    arrival = [(index, record) for _, index, record in heapq.merge(
        *[[(record.send_at, index, record) for record in records] for index, records in enumerate(sessions)])]
    cjk = sum(1 for _, record in arrival if CJK_RUN.search(record.content))
    text_bytes = sum(len(record.content.encode()) for _, record in arrival)
    corpus = {"made": CORPUS_MADE, "messages": len(arrival), "sessions": args.sessions, "seed": args.seed,
              "cjk_fraction": round(cjk / len(arrival), 4), "text_bytes": text_bytes,
              "mean_chars": round(sum(len(r.content) for _, r in arrival) / len(arrival), 1),
              "generate_s": round(time.perf_counter() - started, 1)}
    print(f"corpus: {len(arrival):,} messages in {args.sessions:,} sessions of {turns:,} turns, "
          f"{corpus['cjk_fraction']:.1%} Chinese/Japanese, mean {corpus['mean_chars']} chars, "
          f"{text_bytes / 2**20:.0f} MiB of text; generated in {corpus['generate_s']} s\n  ({CORPUS_MADE})")
    return sessions, arrival, corpus


def build_archive(store: Path, arrival: list[tuple[int, Record]]) -> dict[str, float]:
    """Through the real Archive: its writer thread, one commit at the end, then its merges."""
    started = time.perf_counter()
    archive = Archive(store, commit_interval=3600.0)
    for index, record in arrival:
        archive.appended(session_name(index), [record])
    queued = time.perf_counter()
    archive.flush(timeout=3600.0)
    flushed = time.perf_counter()
    archive.close()
    done = time.perf_counter()
    segments = len(json.loads((archive.index_dir / "meta.json").read_text())["segments"])
    return {"enqueue_s": queued - started, "commit_s": flushed - queued, "merge_wait_s": done - flushed,
            "total_s": done - started, "segments": segments}


def compare_engines(store: Path, fts_path: Path, queries: list[Query], warmup: list[Query]) -> tuple[dict, dict]:
    archive = Archive(store)  # reopened, as a starting server opens it
    connection = open_fts(fts_path)
    try:
        calls = {"archive": lambda query: archive_search(archive, query, LIMIT),
                 "fts5": lambda query: fts_search(connection, query, LIMIT)}
        side_by_side(calls, warmup)
        engines = side_by_side(calls, queries)
        agreed = agreement(archive, connection, queries)
    finally:
        connection.close()
        archive.close()
    print(f"agreement: {agreed['same_hit_sets']}/{agreed['queries']} queries with the same hit set "
          f"(mean {agreed['mean_hits']:.1f} hits), top-10 overlap {agreed['top10_overlap']:.1%}")
    for mismatch in agreed["mismatches"]:
        print(f"  MISMATCH {mismatch}")
    return engines, agreed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=1000, help="timed queries, each once per engine")
    parser.add_argument("--warmup", type=int, default=200, help="other queries run first, untimed")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    load_start = os.getloadavg()
    sessions, arrival, corpus = generate(args)
    with tempfile.TemporaryDirectory(prefix="memsvc-bench-archive-") as tmp:
        data_dir, fts_path = Path(tmp) / "data", Path(tmp) / "fts5.sqlite3"
        store = data_dir / ".store"
        build = {"archive": build_archive(store, arrival), "fts5": build_fts(fts_path, arrival)}
        disk = sizes(store / "archive", fts_path)
        print(f"build: archive {build['archive']['total_s']:.1f} s ({build['archive']['segments']} segments), FTS5 "
              f"{build['fts5']['total_s']:.1f} s (pre-split {build['fts5']['pre_split_s']:.1f} s, insert "
              f"{build['fts5']['insert_s']:.1f} s, optimize {build['fts5']['optimize_s']:.1f} s)")
        print(f"on disk: archive {disk['archive_bytes'] / 2**20:.0f} MiB (doc store "
              f"{disk['archive_doc_store_bytes'] / 2**20:.0f} MiB); FTS5 {disk['fts5_bytes'] / 2**20:.0f} MiB "
              f"(index {disk['fts5_index_bytes'] / 2**20:.0f} MiB, messages table "
              f"{disk['fts5_messages_table_bytes'] / 2**20:.0f} MiB, free pages left by optimize "
              f"{disk['fts5_free_bytes'] / 2**20:.0f} MiB)\n  (FTS5: {FTS5_MADE})")
        timed = make_queries(sessions, args.queries, args.seed)
        warmup = make_queries(sessions, args.warmup, args.seed + 1)
        engines, agreed = compare_engines(store, fts_path, timed, warmup)
        for index in range(args.sessions):
            directory = data_dir / "sessions" / session_name(index)
            directory.mkdir(parents=True)
            history.rewrite(directory / "history.json", sessions[index][-RECENT:])
        served = end_to_end(data_dir, timed, warmup)

    ratio = {"p50": engines["fts5"]["p50_ms"] / engines["archive"]["p50_ms"],
             "p99": engines["fts5"]["p99_ms"] / engines["archive"]["p99_ms"]}
    floor = served["health_check"]["p50_ms"]
    report = {"corpus": corpus, "fts5_made": FTS5_MADE, "build": build, "disk": disk, "agreement": agreed,
              "engines": engines, "fts5_over_archive": {k: round(v, 2) for k, v in ratio.items()},
              "end_to_end": served, "search_over_floor_p50": round(served["search"]["p50_ms"] / floor, 2),
              "load_average": {"start": load_start[0], "end": os.getloadavg()[0]}, "cpus": os.cpu_count()}
    for name in ("archive", "fts5"):
        r = engines[name]
        print(f"{name:8s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  by kind (p50 ms) {r['p50_ms_by_kind']}")
    print(f"FTS5 / archive: x{ratio['p50']:.1f} at p50, x{ratio['p99']:.1f} at p99 (target >= 5x)")
    for name in ("search", "health_check"):
        r = served[name]
        print(f"end to end {name:12s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms")
    print(f"Search / floor: x{report['search_over_floor_p50']} at p50 (target <= 2x); "
          f"{served['queries_with_archive_hits']}/{len(timed)} queries found archived messages")
    print(f"load average: {load_start[0]:.2f} at start, {report['load_average']['end']:.2f} at end "
          f"({os.cpu_count()} cores, shared)")
    save("archive", report)


if __name__ == "__main__":
    main()
