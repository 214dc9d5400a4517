"""The vector tier on real files in a temp directory: generations built by the
real child process, tails, damage detection, compaction, clearing, failing
embedders (a real HTTP server on loopback), client-supplied vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.vectors import files
from memsvc.vectors.embedders.base import EmbeddingFailed
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.generation import Eligible
from memsvc.vectors.store import QUERY_EMBED_LIMIT, Tuning, VectorStore
from tests.support import wait_for
from tests.support.embedding_server import EmbeddingServer, http_embedder

EVERYTHING = Eligible(0, NO_UPPER_BOUND, 0, NO_UPPER_BOUND)
TOPICS = ["database migration", "sandbox testing", "deploy pipeline", "lunch plans", "password reset",
          "docker image size", "rate limits", "unicode bugs"]


def conversation(count: int, start: int = 1) -> list[Record]:
    return [Record(id=n, role="user" if n % 2 else "assistant", send_at=1_700_000_000_000_000_000 + n,
                   content=f"note {n}: talking about {TOPICS[n % len(TOPICS)]} again, item{n}")
            for n in range(start, start + count)]


def manifest(directory: Path) -> dict:
    """The manifest as it is on disk now ({} while a rebuild has removed it)."""
    try:
        return json.loads((directory / "manifest.json").read_text())
    except FileNotFoundError:
        return {}


def built_items(directory: Path) -> int:
    generation = manifest(directory).get("generation")
    return generation["items"] if generation else 0


class Harness:
    """A VectorStore over a temp directory, holding the session's history as the lead's Sessions would."""

    def __init__(self, root: Path, embedder=None, rebuild_rows: int = 16):
        self.root = root
        self.embedder = embedder or BuiltinEmbedder(64)
        self.history: dict[str, list[Record]] = {}
        self.store = VectorStore(root, self.embedder, Tuning(rebuild_rows=rebuild_rows, trees=8, search_k=2000))

    def append(self, session_id: str, records: list[Record]) -> None:
        if session_id not in self.history:  # the window opens a session before its first append
            self.history[session_id] = []
            self.store.recover(session_id, [])
        self.history[session_id].extend(records)
        self.store.appended(session_id, records)

    def search(self, session_id: str, text: str, limit: int = 5, eligible: Eligible = EVERYTHING):
        query = self.embedder.vectors([text])[0]
        return self.store.nearest(session_id, self.history.get(session_id, []), query, limit, eligible)

    def exact(self, session_id: str, text: str, limit: int = 5) -> list[int]:
        records = self.history[session_id]
        scores = self.embedder.vectors([r.content for r in records]) @ self.embedder.vectors([text])[0]
        order = np.lexsort((-np.array([r.id for r in records]), -scores))
        return [records[i].id for i in order[:limit]]

    def directory(self, session_id: str) -> Path:
        return self.root / session_id

    def restart(self, **changes) -> Harness:
        self.store.close()
        again = Harness(self.root, changes.get("embedder", self.embedder), changes.get("rebuild_rows", 16))
        again.history = self.history
        for session_id, records in self.history.items():
            again.store.recover(session_id, list(records))
        return again


@pytest.fixture
def harness(tmp_path):
    made = [Harness(tmp_path / "vectors")]
    yield made[0]
    made[0].store.close()


def test_appended_messages_are_searchable_and_match_exact_search(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(10))
    found = harness.search("s", "password reset")
    assert found.ids == harness.exact("s", "password reset") and found.unsearched == 0
    wait_for(lambda: (harness.directory("s") / "tail-1.log").exists())
    written = manifest(harness.directory("s"))
    assert (written["embedder"], written["dimension"]) == ("builtin-v1", 64)


def test_a_generation_is_built_verified_and_the_tail_after_it_is_searched(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    generation = manifest(harness.directory("s"))["generation"]
    for expected in generation["files"]:
        path = harness.directory("s") / expected["name"]
        assert path.stat().st_size == expected["size"] and files.sha256(path) == expected["sha256"]
    harness.append("s", [Record(id=41, role="user", content="zebra crossing near the office", send_at=1)])
    found = harness.search("s", "zebra crossing", limit=3)
    assert found.ids[0] == 41 and built_items(harness.directory("s")) == 40
    assert harness.search("s", "docker image size", limit=5).ids == harness.exact("s", "docker image size")


@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_a_damaged_annoy_file_is_never_loaded_and_is_rebuilt(harness, damage, caplog):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    before = harness.search("s", "rate limits").ids
    annoy_file = harness.directory("s") / "gen-1.ann"
    data = annoy_file.read_bytes()
    annoy_file.write_bytes(data[:len(data) // 3] if damage == "truncate" else bytes(reversed(data)))
    harness = harness.restart()
    assert harness.search("s", "rate limits").ids == before
    wait_for(lambda: (manifest(harness.directory("s")).get("generation") or {}).get("number") == 2)
    wait_for(lambda: not annoy_file.exists())  # the old generation goes after the swap
    assert "Annoy file damaged" in caplog.text
    assert harness.search("s", "rate limits").ids == before
    harness.store.close()


def test_damaged_vectors_or_tail_records_are_embedded_again(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    harness.append("s", conversation(5, start=41))
    tail = harness.directory("s") / "tail-2.log"
    wait_for(lambda: tail.exists() and tail.stat().st_size == 5 * files.record_size(64))
    vectors_file = harness.directory("s") / "gen-1.vectors.npy"
    vectors_file.write_bytes(vectors_file.read_bytes()[:-10] + b"\0" * 10)
    with tail.open("r+b") as handle:  # garble one record, tear the last
        handle.seek(files.record_size(64) + 30)
        handle.write(b"\xff" * 8)
        handle.truncate(tail.stat().st_size - 7)
    harness = harness.restart()
    for topic in TOPICS:
        assert harness.search("s", topic).ids == harness.exact("s", topic)
    wait_for(lambda: built_items(harness.directory("s")) == 45)
    harness.store.close()


def test_another_embedder_or_dimension_rebuilds_from_history(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(20))
    wait_for(lambda: built_items(harness.directory("s")) == 20)
    harness = harness.restart(embedder=BuiltinEmbedder(32))
    assert harness.search("s", "unicode bugs").ids == harness.exact("s", "unicode bugs")
    directory = harness.directory("s")
    wait_for(lambda: manifest(directory).get("dimension") == 32 and built_items(directory) == 20)
    number = manifest(harness.directory("s"))["generation"]["number"]
    assert np.load(harness.directory("s") / f"gen-{number}.vectors.npy").shape == (20, 32)
    harness.store.close()


def test_vectors_out_of_step_with_history_are_rebuilt(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(20))
    wait_for(lambda: built_items(harness.directory("s")) == 20)
    harness.history["s"] = [Record(id=r.id, role=r.role, content=f"rewritten {r.id} lunch", send_at=r.send_at)
                            for r in harness.history["s"]]
    harness = harness.restart()
    assert harness.search("s", "rewritten lunch", limit=20).ids == harness.exact("s", "rewritten lunch", limit=20)
    harness.store.close()


def test_compaction_drops_entries_below_the_cut(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    del harness.history["s"][:25]
    harness.store.compacted("s", 26, harness.history["s"][0].send_at)
    assert min(harness.search("s", "lunch plans", limit=30).ids) >= 26
    wait_for(lambda: built_items(harness.directory("s")) == 15)
    rows = np.load(harness.directory("s") / "gen-2.rows.npy")
    assert rows["id"].min() == 26


def test_deleted_messages_are_skipped_at_once_and_left_out_by_the_next_build(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    harness.append("s", conversation(4, start=41))  # in the tail
    wait_for(lambda: harness.store.ready_rows("s") is not None)
    target = harness.exact("s", "lunch plans", limit=1)[0]
    gone = [target, 42]
    assert harness.store.deleted("s", gone) == 2
    harness.history["s"] = [r for r in harness.history["s"] if r.id not in gone]
    # The best match is now another message: no deleted one takes a place in the results.
    assert harness.search("s", "lunch plans", limit=5).ids == harness.exact("s", "lunch plans", limit=5)
    wait_for(lambda: built_items(harness.directory("s")) == 42)
    number = manifest(harness.directory("s"))["generation"]["number"]
    assert not set(gone) & set(np.load(harness.directory("s") / f"gen-{number}.rows.npy")["id"].tolist())
    assert harness.store.deleted("s", gone) == 0, "a repeat deletes nothing more"


def test_vectors_of_messages_history_no_longer_holds_are_skipped_after_a_restart(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(40))
    wait_for(lambda: built_items(harness.directory("s")) == 40)
    # Killed after history.json lost the message, before the vector tier heard of it.
    target = harness.exact("s", "docker image size", limit=1)[0]
    harness.history["s"] = [r for r in harness.history["s"] if r.id != target]
    harness = harness.restart()
    assert harness.search("s", "docker image size", limit=5).ids == harness.exact("s", "docker image size", limit=5)
    wait_for(lambda: built_items(harness.directory("s")) == 39)
    assert (manifest(harness.directory("s"))["generation"]["number"]) == 2, "left out, not rebuilt from scratch"
    harness.store.close()


def test_a_message_deleted_while_it_is_embedded_gets_no_vector(harness):
    harness.store.recover("s", [])
    records = conversation(3)
    harness.append("s", records)  # queued; the worker may be embedding them now
    harness.store.deleted("s", [2])
    harness.history["s"] = [records[0], records[2]]
    wait_for(lambda: harness.store.ready_rows("s") is not None)
    assert sorted(harness.search("s", "note", limit=5).ids) == [1, 3]
    harness = harness.restart()
    wait_for(lambda: harness.store.ready_rows("s") is not None)
    assert sorted(harness.search("s", "note", limit=5).ids) == [1, 3]
    harness.store.close()


def test_cleared_drops_everything_and_the_session_starts_over(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(30))
    wait_for(lambda: built_items(harness.directory("s")) == 30)
    harness.append("s", conversation(3, start=31))
    assert harness.store.cleared("s") in (30, 33)
    harness.history["s"] = []
    assert not harness.directory("s").exists()
    assert harness.search("s", "lunch plans").ids == []
    harness.append("s", conversation(2, start=34))
    assert sorted(harness.search("s", "note").ids) == [34, 35]


def test_a_failing_embedder_leaves_messages_pending_counted_and_retried(tmp_path):
    with EmbeddingServer(dimension=32) as server:
        harness = Harness(tmp_path / "vectors", http_embedder(server.base_url, 32, max_retries=0))
        try:
            harness.store.recover("s", [])
            server.fail(10_000)
            harness.append("s", conversation(6))
            with pytest.raises(EmbeddingFailed):  # the query itself cannot be embedded
                harness.search("s", "sandbox testing")
            query = BuiltinEmbedder(32).vectors(["sandbox testing"])[0]
            found = harness.store.nearest("s", harness.history["s"], query, 5, EVERYTHING)
            assert found.ids == [] and found.unsearched == 6
            server.fail(0)
            wait_for(lambda: harness.store.nearest("s", harness.history["s"], query, 5, EVERYTHING).ids)
            assert harness.store.nearest("s", harness.history["s"], query, 5, EVERYTHING).unsearched == 0
        finally:
            harness.store.close()


def test_searches_embed_what_is_pending_up_to_a_limit(tmp_path):
    with EmbeddingServer(dimension=32) as server:
        harness = Harness(tmp_path / "vectors", http_embedder(server.base_url, 32, max_retries=0))
        try:
            harness.store.recover("s", [])
            server.delay = 0.5  # the worker's batches are slow; the search embeds what it needs itself
            harness.append("s", conversation(QUERY_EMBED_LIMIT + 40))
            server.delay = 0
            query = BuiltinEmbedder(32).vectors(["item290"])[0]
            found = harness.store.nearest("s", harness.history["s"], query, 3, EVERYTHING)
            assert found.ids[0] == 290
            assert 0 <= found.unsearched <= 40
        finally:
            harness.store.close()


def test_client_supplied_vectors_are_checked_and_kept(harness):
    harness.store.recover("s", [])
    with pytest.raises(InvalidArgument) as wrong:
        harness.store.check("s", [[0.5] * 63])
    assert wrong.value.reason == "VECTOR_DIMENSION_MISMATCH"
    for bad in ([float("nan")] * 64, [0.0] * 64):
        with pytest.raises(InvalidArgument) as refused:
            harness.store.check("s", [bad])
        assert refused.value.reason == "INVALID_EMBEDDING"
    harness.store.check("s", [[], [0.1] * 64])
    own = np.zeros(64, dtype=np.float32)
    own[5] = 3.0
    records = conversation(3)
    harness.store.supplied("s", records, [[], own.tolist(), []])
    harness.append("s", records)
    found = harness.store.nearest("s", harness.history["s"], own / 3.0, 1, EVERYTHING)
    assert found.ids == [2] and found.scores[0] == pytest.approx(1.0)
    harness = harness.restart()
    wait_for(lambda: harness.store.nearest("s", harness.history["s"], own / 3.0, 1, EVERYTHING).ids == [2])
    harness.store.close()


def test_eligibility_filters_ids_time_and_window(harness):
    harness.store.recover("s", [])
    harness.append("s", conversation(60))
    wait_for(lambda: built_items(harness.directory("s")) == 60)
    base = 1_700_000_000_000_000_000
    window = Eligible(0, 51, base + 10, base + 41)
    found = harness.search("s", "note talking about", limit=32, eligible=window)
    assert found.ids and all(10 <= id_ <= 40 for id_ in found.ids) and len(found.ids) == 31 - 0


def test_ready_means_in_memory_with_nothing_pending_and_counts_what_a_search_scans(harness):
    assert harness.store.ready_rows("s") is None
    harness.store.recover("s", [])
    harness.append("s", conversation(5))
    wait_for(lambda: harness.store.ready_rows("s") == 5)
    assert harness.store.ready_rows("other") is None
