"""Generate: folding a session's new messages into its rolling summary, and
the summary job that runs it for every session that needs it.

Owns moving `.summary_cursor` (cursor.py reads and writes it), chunking,
the summary model's calls, saving summary.json after each chunk, one run per
session at a time, the record of each run's outcome (runs.py keeps it), and
which sessions the job picks. Messages come from an
injected `messages_after(session_id, after_id)` so that the archive can
supply those compacted out of history.json. Must never write history.json,
never store anything a model said anywhere but summary.json, and never log
conversation text.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec

from memsvc.core import layout
from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition, MemsvcError, Unavailable
from memsvc.core.ids import TEMP_PREFIX
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.core.units import NANOS_PER_SECOND
from memsvc.runtime import tracing
from memsvc.summary import llm, rolling
from memsvc.summary.cursor import Cursor, read_cursor, write_cursor
from memsvc.summary.decisions import Judge, exchanges
from memsvc.summary.rolling import InvalidSummary, Summary
from memsvc.summary.runs import Outcome, Run, Trigger, write_run
from memsvc.window.reading import SessionReader, SessionStamps

log = logging.getLogger(__name__)

MessagesAfter = Callable[[str, int], list[Record]]
SUMMARY_PROMPT = "summary.v1.md"
_LANGUAGES = {
    "auto": "write every field's text in the language the conversation mostly uses; when that is Chinese, "
            "write Traditional Chinese (繁體中文), never Simplified.",
    "zh": "Traditional Chinese (繁體中文).", "zh-tw": "Traditional Chinese (繁體中文).",
    "zh-hant": "Traditional Chinese (繁體中文).", "zh-cn": "Simplified Chinese (简体中文).",
    "zh-hans": "Simplified Chinese (简体中文).", "en": "English.", "ja": "Japanese.",
}


_INTERNAL = "a bug in memsvc stopped the run; the server log has the details"


class Result(msgspec.Struct):
    count: int
    "Messages the run took in (the cursor moved past them), noise included."
    summary: Summary | None


class Tally(msgspec.Struct):
    """A run in progress, for its record."""

    messages: int = 0
    "Messages the summary took in so far (its saves moved the cursor past them, or FitContext's fold sent them)."


class Turn(msgspec.Struct):
    """One message of an agent run, as FitContext hands it to `fold`."""

    role: str
    "user, assistant or tool."
    content: str


class Folded(msgspec.Struct):
    summary: Summary | None
    "The summary after the fold; None when the session has none and nothing was folded."
    covered: list[int]
    "Indexes of the turns the summary now covers: folded now, or summarized before."
    count: int
    "Messages sent to the summary model; 0 when no call was needed."


class SummaryReplyInvalid(Unavailable):
    """The summary model answered without a valid summary; a later run may do better."""

    reason = Reason.LLM_REPLY_UNPARSEABLE


def language_rule(reply_lang: str) -> str:
    rule = _LANGUAGES.get(reply_lang.strip().lower())
    if reply_lang.strip().lower() == "auto":
        return str(rule)
    return "write every field's text in " + (rule or f"{reply_lang}.")


def transcript_line(record: Record, max_chars: int) -> str:
    """One message as the models see it, shortened in the middle past `max_chars`."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.send_at // NANOS_PER_SECOND))
    who = f"{record.role} ({record.sender})" if record.sender else record.role
    return llm.shortened(f"[{when}] {who}: {record.content}", max_chars)


def chunks(records: Sequence[Record], lines: Sequence[str], limit: int) -> list[list[int]]:
    """Indexes of `records` in chunks of at most `limit` characters, each ending on a reply.

    Lines are at most half the limit, so a question with its answer always
    fits; a chunk outgrows the limit only when several user messages wait
    for one reply and alone exceed it. `records` must end on a reply.
    """
    done: list[list[int]] = []
    current: list[int] = []
    size = 0
    last_reply = -1  # position in `current` of its last reply
    for index, line in enumerate(lines):
        cost = len(line) + 1
        if current and size + cost > limit and last_reply >= 0:
            done.append(current[:last_reply + 1])
            current = current[last_reply + 1:]
            size = sum(len(lines[i]) + 1 for i in current)
            last_reply = -1
        current.append(index)
        size += cost
        if records[index].role != "user":
            last_reply = len(current) - 1
    if current:
        done.append(current)
    return done


def _previous(session_id: str, path: Path) -> Summary | None:
    """The stored summary; FAILED_PRECONDITION when the file is there but unreadable."""
    previous = rolling.load(path)
    if previous is None and path.exists():
        raise FailedPrecondition(
            f"summary.json of session {session_id} is unreadable (see the server log); fix or delete it "
            "so that a new summary does not replace it", reason=Reason.SUMMARY_UNREADABLE)
    return previous


def _matched(turns: Sequence[Turn], stored: Sequence[Record]) -> dict[int, Record]:
    """Turn index -> the stored message with the same role and content.

    Matched from the newest backwards: a run's older turns are the end of
    the stored history, and a text said twice matches its latest saying.
    """
    by_text: dict[tuple[str, str], list[Record]] = {}
    for record in stored:
        by_text.setdefault((record.role, record.content), []).append(record)
    found: dict[int, Record] = {}
    for index in range(len(turns) - 1, -1, -1):
        candidates = by_text.get((turns[index].role, turns[index].content))
        if candidates:
            found[index] = candidates.pop()
    return found


class Summarizer:
    def __init__(self, settings: Settings, sessions: SessionReader, stamps: SessionStamps,
                 messages_after: MessagesAfter, model: llm.Model | None, judge: Judge | None):
        self.settings = settings
        self.sessions = sessions
        self.stamps = stamps
        self.messages_after = messages_after
        self.model = model
        self.judge = judge
        self.stopping = threading.Event()
        self._busy: set[str] = set()
        self._free = threading.Condition()
        self._retry: set[str] = set()
        "Sessions whose last job run stopped early: due again whatever the mtimes say."

    # -- one run per session ---------------------------------------------------

    @contextmanager
    def guard(self, session_id: str, deadline: Deadline = UNBOUNDED, *, wait: bool = True) -> Iterator[bool]:
        """Hold the session against other summary runs, waiting within `deadline`; yields False if busy and
        not waiting.

        Reset and RemoveSession should hold it too, so a run cannot write a
        summary back after they deleted it.
        """
        with self._free:
            if session_id in self._busy and not wait:
                yield False
                return
            deadline.wait_for(self._free, lambda: session_id not in self._busy,
                              f"waiting for the summary run on session {session_id!r}")
            self._busy.add(session_id)
        try:
            yield True
        finally:
            with self._free:
                self._busy.discard(session_id)
                self._free.notify_all()

    def summarize(self, session_id: str, deadline: Deadline = UNBOUNDED) -> Result:
        """Generate now, for the Summarize RPC; waits for a run already going on the session (within
        `deadline`, which each chunk's save checks too)."""
        self.sessions.require(session_id)
        self._require_model()
        with self.guard(session_id, deadline):
            return self.generate(session_id, "summarize", deadline)

    def _require_model(self) -> llm.Model:
        if self.model is None:
            raise FailedPrecondition(
                "no summary model is configured: set summary_model (--summary-model or MEMSVC_SUMMARY_MODEL) "
                "and llm_base_url to an OpenAI-compatible endpoint", reason=Reason.SUMMARY_MODEL_NOT_CONFIGURED)
        return self.model

    # -- the record of a run ---------------------------------------------------

    @contextmanager
    def _recorded(self, session_id: str, trigger: Trigger) -> Iterator[Tally]:
        """Record how the run in the block ended, in the session's directory; the caller holds the guard, so
        no Reset or removal deletes the directory's summary files meanwhile."""
        tally, started = Tally(), time.time_ns()

        def record(outcome: Outcome, reason: str = "", message: str = "") -> None:
            run = Run(trigger=trigger, started_at=started, finished_at=time.time_ns(), outcome=outcome,
                      messages=tally.messages, reason=reason, message=message)
            try:
                write_run(self.sessions.directory(session_id) / layout.SUMMARY_RUN, run)
            except OSError as exc:  # the run's own result stands: its record only reports it
                log.warning("summary run not recorded", extra={"session_id": session_id, "error": str(exc)})

        try:
            yield tally
        except MemsvcError as exc:
            record("failed", exc.reason, exc.message)
            raise
        except Exception:
            record("failed", Reason.INTERNAL, _INTERNAL)
            raise
        if tally.messages:
            record("summarized")
        elif trigger == "summarize":
            # Only an asked-for run that found nothing is one: the job looks again every tick while a question
            # waits for its reply (rewriting the record each time), and FitContext folds until nothing is left.
            record("nothing_new")

    # -- Generate --------------------------------------------------------------

    @tracing.traced("summary.generate")
    def generate(self, session_id: str, trigger: Trigger, deadline: Deadline = UNBOUNDED) -> Result:
        """Fold the messages after the cursor into the summary, recording the run; the caller holds the guard.
        Nothing is saved once `deadline` passed."""
        model = self._require_model()
        with self._recorded(session_id, trigger) as tally:
            return self._generate(session_id, model, tally, deadline)

    def _generate(self, session_id: str, model: llm.Model, tally: Tally, deadline: Deadline) -> Result:
        directory = self.sessions.directory(session_id)
        summary_path, cursor_path = directory / layout.SUMMARY, directory / layout.CURSOR
        previous = _previous(session_id, summary_path)
        cursor = read_cursor(cursor_path)
        if previous is not None and cursor is None:
            # A summary from before cursors existed: it already covers what is there.
            latest = self.messages_after(session_id, 0)[-1:]
            if latest:
                write_cursor(cursor_path, latest[0])
            return Result(0, previous)
        pending = self._pending(session_id, cursor)
        if not pending:
            return Result(0, previous)
        current = rolling.within_rules(previous or Summary())
        kept = pending
        if self.judge is not None:
            kept, current = self._without_noise(pending, current)
            if not kept:
                deadline.check(f"saving the summary of session {session_id!r}")
                rolling.save(summary_path, current)
                write_cursor(cursor_path, pending[-1])
                tally.messages = len(pending)
                return Result(len(pending), current)
        limit = self.settings.summary_chunk_chars
        lines = [transcript_line(record, limit // 2 - 1) for record in kept]
        parts = chunks(kept, lines, limit)
        position = {record.id: index for index, record in enumerate(pending)}
        for number, part in enumerate(parts):
            if self.stopping.is_set():
                break
            try:
                current = self._merged(model, current, "\n".join(lines[i] for i in part))
            except (MemsvcError, InvalidSummary) as exc:
                raise self._stopped(session_id, exc, tally.messages, len(pending), number, len(parts)) from exc
            last = pending[-1] if number == len(parts) - 1 else pending[position[kept[parts[number + 1][0]].id] - 1]
            deadline.check(f"saving the summary of session {session_id!r}")
            rolling.save(summary_path, current)
            write_cursor(cursor_path, last)
            tally.messages = position[last.id] + 1
        return Result(tally.messages, current)

    def _merged(self, model: llm.Model, current: Summary, transcript: str) -> Summary:
        """One summary call: `transcript` merged into `current`."""
        system = llm.fill(llm.prompt(SUMMARY_PROMPT), summary=rolling.encode(current).decode(),
                          language=language_rule(self.settings.reply_lang))
        return rolling.within_rules(rolling.parse_reply(model.complete(system, transcript)))

    # -- Fold, for FitContext --------------------------------------------------

    @tracing.traced("summary.fold")
    def fold(self, session_id: str, turns: Sequence[Turn]) -> Folded:
        """Fold an agent run's older turns into the session's summary, with at most one summary call.

        Turns are matched to the session's stored messages by role and content.
        Stored messages the summary already covers need no call; the others,
        with every stored message between the cursor and the newest of them
        (so none is skipped), and the turns the session does not hold, go
        into one call of at most summary_chunk_chars, oldest first. summary.json
        is saved and the cursor moves past the stored messages folded, as in
        a run of the job. A failed call changes nothing and raises.
        """
        model = self._require_model()
        self.sessions.require(session_id)
        with self.guard(session_id), self._recorded(session_id, "fit_context") as tally:
            directory = self.sessions.directory(session_id)
            summary_path, cursor_path = directory / layout.SUMMARY, directory / layout.CURSOR
            previous = _previous(session_id, summary_path)
            cursor = read_cursor(cursor_path)
            # A summary from before cursors existed covers everything stored, as generate() reads it.
            legacy = previous is not None and cursor is None
            matched = _matched(turns, self.sessions.records_after(session_id, 0))
            covered = [index for index, record in matched.items()
                       if legacy or (cursor is not None and cursor.covers(record))]
            pending = [] if legacy else self._pending(session_id, cursor)
            position = {record.id: index for index, record in enumerate(pending)}
            newest = max((position.get(record.id, -1) for record in matched.values()), default=-1)
            in_run = {record.id for record in matched.values()}
            items = [record for record in pending[:newest + 1] if record.id not in in_run]
            sources: list[int | None] = [None] * len(items)
            now = time.time_ns()
            done = set(covered)
            for index, turn in enumerate(turns):
                if index not in done:
                    record = matched.get(index)
                    items.append(record if record else Record(role=turn.role, content=turn.content, send_at=now))
                    sources.append(index)
            if not items:
                return Folded(previous, sorted(covered), 0)
            limit = self.settings.summary_chunk_chars
            lines = [transcript_line(item, limit // 2 - 1) for item in items]
            first = chunks(items, lines, limit)[0]
            try:
                current = self._merged(model, rolling.within_rules(previous or Summary()),
                                       "\n".join(lines[i] for i in first))
            except (MemsvcError, InvalidSummary) as exc:
                raise self._stopped(session_id, exc, 0, len(first), 0, 1) from exc
            rolling.save(summary_path, current)
            folded_ids = {items[i].id for i in first if items[i].id}
            last = None
            for record in pending:
                if record.id not in folded_ids:
                    break
                last = record
            if last is not None:
                write_cursor(cursor_path, last)
            tally.messages = len(first)
            covered += [source for source in (sources[i] for i in first) if source is not None]
            return Folded(current, sorted(covered), len(first))

    def _pending(self, session_id: str, cursor: Cursor | None) -> list[Record]:
        """Messages after the cursor, less the user messages still waiting for a reply."""
        pending = self.messages_after(session_id, cursor.last_id if cursor else 0)
        if cursor is not None and cursor.last_id == 0:
            # A reference cursor: its second is summarized whole, as the reference reads it.
            pending = [record for record in pending if not cursor.covers(record)]
        end = len(pending)
        while end and pending[end - 1].role == "user":
            end -= 1
        return pending[:end]

    def _without_noise(self, pending: list[Record], current: Summary) -> tuple[list[Record], Summary]:
        assert self.judge is not None
        groups = exchanges(pending)
        limit = self.settings.summary_chunk_chars
        texts = ["\n".join(transcript_line(record, limit // 8) for record in group) for group in groups]
        pruning = self.judge.prune(texts, current)
        kept = [record for index, group in enumerate(groups) if index not in pruning.noise for record in group]
        return kept, rolling.without(current, pruning.superseded_key_decisions, pruning.superseded_past_discussions)

    def _stopped(self, session_id: str, exc: Exception, covered: int, total: int, number: int,
                 parts: int) -> MemsvcError:
        """The error that ends a run at a failed chunk, saying what was kept."""
        log.warning("summary run stopped at a failed chunk", extra={
            "session_id": session_id, "chunk": number + 1, "chunks": parts, "messages_summarized": covered,
            "reason": getattr(exc, "reason", SummaryReplyInvalid.reason)})
        progress = (f"; {covered} of {total} messages were summarized before it, Summarize again to continue"
                    if covered else "; the summary is unchanged")
        if isinstance(exc, InvalidSummary):
            return SummaryReplyInvalid(f"the summary model's reply held no valid summary ({exc}){progress}")
        assert isinstance(exc, MemsvcError)
        return type(exc)(exc.message + progress, reason=exc.reason, metadata=exc.metadata)

    # -- the job ---------------------------------------------------------------

    def due(self) -> list[str]:
        """Sessions the job runs: history.json newer than summary.json (or no summary),
        plus those whose last run stopped early; never `temp-` sessions."""
        return [stamp.session_id for stamp in self.stamps.stamps()
                if not stamp.session_id.startswith(TEMP_PREFIX) and stamp.history
                and (stamp.history > (stamp.summary or -1) or stamp.session_id in self._retry)]

    def run_job(self) -> None:
        """One tick of the summary job: each due session in turn, skipping busy ones."""
        if self.model is None:
            log.debug("summary job skipped: no summary_model")
            return
        for session_id in self.due():
            if self.stopping.is_set():
                return
            with self.guard(session_id, wait=False) as held:
                if not held:
                    continue
                try:
                    result = self.generate(session_id, "job")
                except MemsvcError:
                    self._retry.add(session_id)  # _stopped logged it
                    continue
                except Exception:
                    log.exception("summary run failed", extra={"session_id": session_id})
                    self._retry.add(session_id)
                    continue
                if self.stopping.is_set():
                    self._retry.add(session_id)
                else:
                    self._retry.discard(session_id)
                log.info("session summarized", extra={"session_id": session_id, "messages": result.count})

    def stop(self) -> None:
        """Stop after the chunk in flight; what was done stays saved."""
        self.stopping.set()
