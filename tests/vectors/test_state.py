"""One session's vector state: loading it against history.json, storing
batches, planning and installing a build with the real child process, and
clearing, on real files in a temp directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from memsvc.core.records import Record
from memsvc.vectors import files
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.loading import load, record_rows
from memsvc.vectors.state import SessionVectors

EMBEDDER = BuiltinEmbedder(32)


def history(count: int, start: int = 1, word: str = "topic") -> list[Record]:
    return [Record(id=n, role="user", content=f"{word} {n} about item{n}", send_at=1_000 + n)
            for n in range(start, start + count)]


def loaded(directory: Path, records: list[Record]) -> SessionVectors:
    state = SessionVectors(directory.name, directory)
    state.install(load(directory, EMBEDDER, records), records)
    return state


def embed_pending(state: SessionVectors) -> None:
    batch = sorted(state.pending.values(), key=lambda record: record.id)
    state.store(record_rows(batch), EMBEDDER.vectors([record.content for record in batch]), state.epoch, EMBEDDER)


def test_a_new_session_loads_empty_with_every_message_pending(tmp_path: Path):
    records = history(5)
    state = loaded(tmp_path / "s", records)
    assert state.loaded and not state.on_disk and sorted(state.pending) == [1, 2, 3, 4, 5]
    embed_pending(state)
    assert not state.pending and state.tail.length == 5 and state.has_vector == {1, 2, 3, 4, 5}
    again = loaded(tmp_path / "s", records)
    assert not again.pending and again.tail.length == 5  # nothing is embedded twice after a restart


def test_vectors_of_messages_history_no_longer_holds_are_thrown_away(tmp_path: Path):
    state = loaded(tmp_path / "s", history(3))
    embed_pending(state)
    reused = history(3, word="different")  # a crash between a Reset and its clearing reused the ids
    fresh = loaded(tmp_path / "s", reused)
    assert sorted(fresh.pending) == [1, 2, 3] and fresh.tail.length == 0 and fresh.has_vector == set()


def test_another_embedder_starts_the_index_over(tmp_path: Path):
    records = history(3)
    state = loaded(tmp_path / "s", records)
    embed_pending(state)
    other = load(tmp_path / "s", BuiltinEmbedder(16), records)
    assert not other.on_disk and other.tail.length == 0 and other.manifest.dimension == 16


def test_the_floor_drops_pending_work_and_counts_dead_rows(tmp_path: Path):
    state = loaded(tmp_path / "s", history(6))
    embed_pending(state)
    state.queue(history(2, start=7))
    state.raise_floor(5)
    assert sorted(state.pending) == [7, 8] and state.dead_rows() == 4
    assert state.needs_build(rebuild_rows=1_000)  # dead rows ask for a rebuild


def test_a_build_is_planned_run_installed_and_the_tail_moves_past_it(tmp_path: Path):
    state = loaded(tmp_path / "s", history(40))
    embed_pending(state)
    assert state.needs_build(rebuild_rows=16) and not state.needs_build(rebuild_rows=100)
    plan = state.plan_build(trees=4)
    assert plan is not None and state.plan_build(trees=4) is None  # one build at a time
    state.queue(history(2, start=41))
    embed_pending(state)  # appends go to the next segment while the build runs
    report = subprocess.run(plan.command, capture_output=True, check=True, timeout=120).stdout
    assert state.install_build(plan, report) == 40
    state.end_build()
    assert state.generation is not None and state.generation.info.items == 40
    assert state.tail.view()[0]["id"].tolist() == [41, 42]
    manifest = files.read_manifest(tmp_path / "s")
    assert manifest is not None and manifest.generation == state.generation.info
    assert manifest.tail_from == plan.last_segment + 1
    assert files.tail_segments(tmp_path / "s") == [plan.last_segment + 1]
    reopened = loaded(tmp_path / "s", history(42))
    assert reopened.generation is not None and reopened.tail.length == 2 and not reopened.pending


def test_a_build_finished_after_a_clear_is_discarded(tmp_path: Path):
    state = loaded(tmp_path / "s", history(20))
    embed_pending(state)
    plan = state.plan_build(trees=2)
    report = subprocess.run(plan.command, capture_output=True, check=True, timeout=120).stdout
    assert state.clear() == 20
    assert state.install_build(plan, report) == 0
    assert state.generation is None and not (tmp_path / "s").exists()


def test_record_rows_tie_each_vector_to_its_message():
    rows = record_rows(history(2))
    assert rows["id"].tolist() == [1, 2] and rows["send_at"].tolist() == [1_001, 1_002]
    assert rows["check"][0] == files.content_check("topic 1 about item1")
    assert np.all(rows["check"][0] != rows["check"][1])
