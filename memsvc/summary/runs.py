"""`.summary_run.json`: how the summarizer's last run on a session went, as GetSummary shows it.

Owns the record's shape, writing it (one atomic replace, as the cursor is
written) and reading it. A record that cannot be read is logged, left in
place (the next run replaces it) and read as no run: it must never fail a
read of the summary. Must never decide when a run starts or how it ended
(summarizer.py does), and never hold conversation text: a failure keeps its
reason and the domain error's message, which never carries any.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import msgspec

from memsvc.core import durable

log = logging.getLogger(__name__)

Trigger = Literal["job", "summarize", "fit_context"]
"What started a run: the summary job, the Summarize RPC, or FitContext folding older turns."
Outcome = Literal["summarized", "nothing_new", "failed"]


class Run(msgspec.Struct, kw_only=True, frozen=True):
    trigger: Trigger
    started_at: int
    "UTC Unix nanoseconds."
    finished_at: int
    "UTC Unix nanoseconds."
    outcome: Outcome
    messages: int = 0
    "Messages the summary took in: all of them when summarized, those saved before the failure when failed."
    reason: str = ""
    "failed: the error's ErrorInfo reason (a name of core/reasons.py's catalogue); empty otherwise."
    message: str = ""
    "failed: the error's message; empty otherwise."


_decode = msgspec.json.Decoder(Run).decode


def read_run(path: Path) -> Run | None:
    """The last run, None when none was recorded or its record cannot be read (logged, left in place)."""
    try:
        return _decode(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError) as exc:  # a ValidationError is a DecodeError
        log.warning("unreadable summary run record left in place; shown as no run", extra={
            "path": str(path), "error": f"{type(exc).__name__}: {exc}"})
        return None


def write_run(path: Path, run: Run) -> None:
    durable.atomic_write(path, msgspec.json.encode(run))
