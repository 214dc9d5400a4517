"""Generations: built by the real child process, opened only after their
checks pass, queried with Annoy or exactly, and the eligibility rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from memsvc.core.units import NO_UPPER_BOUND
from memsvc.vectors import build, files
from memsvc.vectors.files import ROW_DTYPE, TailWriter
from memsvc.vectors.generation import EXACT_ITEMS, Damaged, Eligible, Generation, best, exact

DIMENSION = 16
EVERYTHING = Eligible(0, NO_UPPER_BOUND, 0, NO_UPPER_BOUND)


def corpus(count: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rows = np.zeros(count, dtype=ROW_DTYPE)
    rows["id"] = np.arange(1, count + 1)
    rows["send_at"] = np.arange(1, count + 1) * 10
    vectors = np.random.default_rng(seed).normal(size=(count, DIMENSION)).astype(np.float32)
    return rows, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def built(directory: Path, count: int, trees: int = 4, first_id: int = 0) -> files.GenerationInfo:
    """A generation built by the real child process from one tail segment."""
    directory.mkdir(parents=True, exist_ok=True)
    rows, vectors = corpus(count)
    TailWriter(directory / files.tail_name(1), DIMENSION).append(rows, vectors)
    report = subprocess.run(build.command(directory, 1, DIMENSION, trees, first_id, None, [1]),
                            capture_output=True, check=True, timeout=120).stdout
    info = build.parse_report(report)
    assert info is not None
    return info


def test_best_keeps_the_highest_scores_and_breaks_ties_toward_newer_messages():
    ids = np.array([1, 2, 3, 4, 5])
    scores = np.array([0.5, 0.9, 0.9, 0.1, 0.7], dtype=np.float32)
    chosen = best(ids, scores, 3)
    assert chosen.ids.tolist() == [3, 2, 5] and chosen.scores.tolist() == pytest.approx([0.9, 0.9, 0.7])
    assert best(ids, scores, 10).ids.tolist() == [3, 2, 5, 1, 4]


def test_eligibility_bounds_ids_and_times_half_open():
    rows, _ = corpus(10)
    eligible = Eligible(first_id=3, below_id=8, since=40, until=70)
    assert rows["id"][eligible.mask(rows)].tolist() == [4, 5, 6]
    assert eligible.admits(4, 40) and not eligible.admits(8, 50) and not eligible.admits(5, 70)
    assert eligible.covers(4, 6, 40, 69) and not eligible.covers(2, 6, 40, 69)


def test_exact_scores_by_cosine_within_the_eligible_rows():
    rows, vectors = corpus(50)
    query = vectors[9]
    assert exact(rows, vectors, query, 1, EVERYTHING).ids.tolist() == [10]
    limited = exact(rows, vectors, query, 5, Eligible(20, 30, 0, NO_UPPER_BOUND))
    truth = 20 + np.argsort(-(vectors[19:29] @ query))[:5]
    assert limited.ids.tolist() == truth.tolist()
    assert len(exact(rows, vectors, query, 5, Eligible(100, 200, 0, NO_UPPER_BOUND)).ids) == 0


def test_the_child_process_builds_a_generation_the_manifest_can_check(tmp_path: Path):
    info = built(tmp_path, 300, first_id=11)
    assert info.number == 1 and info.items == 290 and info.trees == 4
    assert [entry.name for entry in info.files] == list(files.generation_names(1))
    assert files.damaged_files(tmp_path, info) == []
    generation = Generation.open(tmp_path, info, DIMENSION)
    assert generation.index is not None and generation.rows["id"].min() == 11


def test_annoy_answers_past_the_exact_threshold_and_finds_what_exact_finds(tmp_path: Path):
    count = EXACT_ITEMS + 500
    info = built(tmp_path, count, trees=10)
    generation = Generation.open(tmp_path, info, DIMENSION)
    rows, vectors = corpus(count)
    for n in range(0, count, 1_999):
        annoy = generation.nearest(vectors[n], 5, EVERYTHING, search_k=30_000).ids.tolist()
        assert annoy == exact(rows, vectors, vectors[n], 5, EVERYTHING).ids.tolist()
    recent = Eligible(count - 3_000, NO_UPPER_BOUND, 0, NO_UPPER_BOUND)  # few qualify: scanned exactly
    assert generation.nearest(vectors[0], 3, recent, search_k=100).ids.tolist() == \
        exact(rows, vectors, vectors[0], 3, recent).ids.tolist()


def test_a_damaged_generation_is_refused_and_a_damaged_annoy_file_is_only_searched_exactly(tmp_path: Path):
    info = built(tmp_path, 100)
    rows_name, vectors_name, index_name = files.generation_names(1)
    index = tmp_path / index_name
    index.write_bytes(index.read_bytes()[:-64])  # truncated: loading it could crash the process
    generation = Generation.open(tmp_path, info, DIMENSION)
    assert generation.index is None
    _, vectors = corpus(100)
    assert generation.nearest(vectors[41], 1, EVERYTHING, search_k=100).ids.tolist() == [42]
    (tmp_path / vectors_name).write_bytes(b"garbage")
    with pytest.raises(Damaged, match=vectors_name):
        Generation.open(tmp_path, info, DIMENSION)


def test_a_build_with_nothing_live_reports_no_generation(tmp_path: Path):
    assert built_nothing(tmp_path) is None


def built_nothing(directory: Path) -> files.GenerationInfo | None:
    rows, vectors = corpus(5)
    TailWriter(directory / files.tail_name(1), DIMENSION).append(rows, vectors)
    return build.build(directory, 1, DIMENSION, 2, first_id=100, previous=None, tails=[1])
