"""`memsvc eval` on the shipped example (examples/eval), run as a real `memsvc` process against a real server:
the conversation loaded, every mode asked every question, each figure checked against the server's own
answers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.in_process

EXAMPLE = ROOT / "examples" / "eval"


def memsvc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={"COLUMNS": "200", "PATH": ""}, check=False)


def test_eval_measures_every_mode_on_the_shipped_example(make_server, tmp_path):
    server = make_server()
    report = tmp_path / "report.json"
    done = memsvc("--target", server.tcp, "eval", "bakery", str(EXAMPLE / "questions.jsonl"),
                  "--load", str(EXAMPLE / "conversation.jsonl"), "--report", str(report), "-k", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["MODE", "QUESTIONS", "RECALL@5", "MRR", "P50", "MS", "P95", "MS"]
    printed = {cells[0]: cells for cells in (line.split() for line in lines[2:])}
    assert list(printed) == ["keyword", "semantic", "hybrid"]
    written = json.loads(report.read_text())
    assert (written["session"], written["k"], written["questions"]) == ("bakery", 5, 18)
    questions = [json.loads(line) for line in (EXAMPLE / "questions.jsonl").read_text().splitlines()]
    conversation = (EXAMPLE / "conversation.jsonl").read_text().splitlines()
    with server.client() as client:
        stored = client.list_messages("bakery", page_size=100).messages
        assert [m.content for m in stored] == [json.loads(line)["content"] for line in conversation]
        assert [m.id for m in stored] == list(range(1, len(conversation) + 1))
        for mode in written["modes"]:
            recalls, reciprocal_ranks = [], []
            for question, asked in zip(questions, mode["questions"], strict=True):
                hits = client.search("bakery", question["question"], match=mode["mode"], limit=5,
                                     include_window=True).hits
                found = [hit.message.id for hit in sorted((h for h in hits if not h.is_context),
                                                          key=lambda h: -h.score)]
                assert asked["found_ids"] == found, (mode["mode"], question)
                answers = [set(a) if isinstance(a, list) else {a} for a in question["answers"]]
                recalls.append(sum(1 for a in answers if a & set(found)) / len(answers))
                first = next((n for n, id_ in enumerate(found, 1) if any(id_ in a for a in answers)), 0)
                reciprocal_ranks.append(1 / first if first else 0.0)
            assert mode["recall_at_k"] == pytest.approx(sum(recalls) / len(recalls))
            assert mode["mrr"] == pytest.approx(sum(reciprocal_ranks) / len(reciprocal_ranks))
            assert printed[mode["mode"]][2] == f"{mode['recall_at_k']:.3f}"
            assert 0 < mode["latency_ms_p50"] <= mode["latency_ms_p95"]
    assert any(mode["recall_at_k"] > 0.5 for mode in written["modes"])

    again = memsvc("--target", server.tcp, "eval", "bakery", str(EXAMPLE / "questions.jsonl"),
                   "--load", str(EXAMPLE / "conversation.jsonl"))
    assert again.returncode == 2 and "already holds messages" in again.stderr


def test_a_malformed_questions_file_is_refused_naming_its_line(tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"question": "ok?", "answers": [1]}\n{"question": "which?", "answers": ["one"]}\n')
    done = memsvc("eval", "s", str(questions))
    assert done.returncode == 2
    assert done.stderr.strip() == f"memsvc: {questions}:2: each answer is a message id or a list of them"
