"""How the operator commands print: human-readable tables (tabulate) by default, JSON with --json.

Owns formatting only: times as local "YYYY-MM-DD HH:MM:SS", long text cut to one line, results
(memsvc_client dataclasses) as JSON objects named as the contract's fields. Must never make
calls.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from tabulate import tabulate

CELL = 72
"""Characters of text a table cell shows (the rest is in --json)."""


def when(unix_nano: int) -> str:
    return datetime.fromtimestamp(unix_nano / 1e9).strftime("%Y-%m-%d %H:%M:%S") if unix_nano else "-"


def cut(text: str, width: int = CELL) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
    rows = list(rows)
    print(tabulate(rows, headers=list(headers), tablefmt="simple", disable_numparse=True) if rows else empty)


def as_json(value: Any) -> None:
    """A result dataclass (or a dict or list of them) as indented JSON on stdout."""
    json.dump(_plain(value), sys.stdout, ensure_ascii=False, indent=2)
    print()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
