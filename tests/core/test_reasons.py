"""The catalogue of error reasons: every reason memsvc raises is in it with one status, none is raised as a
bare string, every entry is used, and docs/errors.md shows the table as the catalogue has it."""

from __future__ import annotations

import ast
from pathlib import Path

import grpc
import pytest

from memsvc.core.errors import InvalidArgument, NotFound
from memsvc.core.reasons import Kind, Reason
from memsvc.rpc.status import CODES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [path for path in (ROOT / "memsvc").rglob("*.py") if path.name != "reasons.py"]


def _reason_values() -> list[tuple[Path, int, ast.expr]]:
    """Every expression memsvc passes as `reason=` or assigns to a class's `reason`."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                found += [(path, node.lineno, keyword.value) for keyword in node.keywords if keyword.arg == "reason"]
            elif isinstance(node, ast.Assign) and any(isinstance(target, ast.Name) and target.id == "reason"
                                                      for target in node.targets):
                found.append((path, node.lineno, node.value))
    return found


def test_no_reason_is_raised_as_a_string_the_catalogue_could_lack():
    literal = [f"{path.relative_to(ROOT)}:{line}" for path, line, value in _reason_values()
               if isinstance(value, ast.Constant | ast.JoinedStr)]
    assert not literal, f"reasons given as strings, not catalogue entries: {literal}"


def test_every_catalogued_reason_is_raised_somewhere():
    used = {node.attr for path in SOURCES for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Reason"}
    assert set(Reason.__members__) - used == set(), "catalogued but never raised: remove them or raise them"


def test_a_reason_of_another_status_cannot_be_raised():
    with pytest.raises(TypeError, match="SESSION_NOT_FOUND is NOT_FOUND"):
        InvalidArgument("wrong kind", reason=Reason.SESSION_NOT_FOUND)
    assert NotFound("fine", reason=Reason.SESSION_NOT_FOUND).reason == "SESSION_NOT_FOUND"


def test_every_reason_is_upper_snake_with_a_meaning_and_a_status():
    for reason in Reason:
        assert reason.value == reason.name and reason.name.replace("_", "").isupper()
        assert reason.meaning.endswith(".") and isinstance(CODES[reason.kind], grpc.StatusCode)
    assert set(CODES) == set(Kind)


def catalogue_table() -> str:
    rows = ["| reason | status | meaning |", "|---|---|---|"]
    rows += [f"| `{reason.name}` | {CODES[reason.kind].name} | {reason.meaning} |" for reason in Reason]
    return "\n".join(rows)


def test_the_docs_show_the_catalogue_as_it_is():
    text = (ROOT / "docs/errors.md").read_text()
    assert catalogue_table() in text, "docs/errors.md's table is not the catalogue's:\n" + catalogue_table()
