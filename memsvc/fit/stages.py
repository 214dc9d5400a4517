"""The stages of in-run compaction, each one step on a Run, reporting what it did.

Owns what each stage changes: ExtractOldHistories folds the older turns into
the session's rolling summary (the summarizer's one-call fold, called again
while the run is over its target, within the calls it is allowed) and puts
the turn context carrying it in their place; ToolHistory puts one plain-text
summary, written by the summary model, in place of the oldest tool-call
exchanges (a call never leaves without its results); TrimFallback drops the
oldest whole exchanges; RawToolFallback writes tool calls and results as
plain text. A stage whose model call fails leaves the run as it was and says
why. Must never decide which stages run: the fitter does.
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec

from memsvc.core.errors import MemsvcError, NotFound
from memsvc.core.reasons import Reason
from memsvc.fit import chat
from memsvc.fit.run import Exchange, Run
from memsvc.runtime import tracing
from memsvc.summary import llm, rolling
from memsvc.summary.summarizer import Folded, Summarizer, SummaryReplyInvalid, Turn

Stage = Literal["check_threshold", "extract_old_histories", "tool_history", "trim_fallback", "raw_tool_fallback"]
Outcome = Literal["compacted", "unchanged", "skipped", "failed"]
TOOL_HISTORY_PROMPT = "tool_history.v1.md"
MIN_SUMMARY_TOKENS, MAX_SUMMARY_TOKENS = 256, 2048
"Room left for ToolHistory's summary: an eighth of the target, within these bounds."
REQUEST_CHARS = 2000
"How much of the user's request the ToolHistory prompt quotes."
LINE_CHARS = 500
"The least of each call or result ToolHistory's model sees when many share summary_chunk_chars."
NO_LLM = ("no LLM is configured (set summary_model and llm_base_url): {} skipped; "
          "the messages it would have compacted are kept")


class StageReport(msgspec.Struct):
    stage: Stage
    outcome: Outcome
    tokens_after: int
    detail: str = ""
    reason: str = ""
    messages_removed: int = 0


def skipped_for_no_llm(stage: Stage, run: Run) -> StageReport:
    name = "ExtractOldHistories" if stage == "extract_old_histories" else "ToolHistory"
    return StageReport(stage, "skipped", run.total, NO_LLM.format(name), "LLM_NOT_CONFIGURED")


def failed(stage: Stage, run: Run, error: MemsvcError, kept: str) -> StageReport:
    return StageReport(stage, "failed", run.total, f"{error.message}; {kept} kept as they were", error.reason)


class SummaryCalls:
    """The summary calls ExtractOldHistories may still make in one FitContext: at most fit_max_summary_calls,
    and none that would likely end past the caller's deadline (judged by the longest call so far)."""

    def __init__(self, limit: int, deadline: float | None):
        self.limit, self.deadline = limit, deadline
        self.made, self.longest = 0, 0.0

    def refusal(self) -> str:
        """Why no further call may start (a stable reason), or "" when one may."""
        if self.made >= self.limit:
            return "SUMMARY_CALL_LIMIT"
        if self.deadline is not None and time.monotonic() + self.longest > self.deadline:
            return "DEADLINE_TOO_SHORT"
        return ""

    def fold(self, summarizer: Summarizer, session_id: str, turns: list[Turn]) -> Folded:
        """One fold, counted and timed when it called the model."""
        started = time.monotonic()
        folded = summarizer.fold(session_id, turns)
        if folded.count:
            self.made += 1
            self.longest = max(self.longest, time.monotonic() - started)
        return folded


STOPPED = {"SUMMARY_CALL_LIMIT": "fit_max_summary_calls ({limit}) reached",
           "DEADLINE_TOO_SHORT": "another call would end past the caller's deadline"}


@tracing.traced("fit.extract_old_histories")
def extract_old_histories(run: Run, summarizer: Summarizer, session_id: str, target: int,
                          calls: SummaryCalls) -> StageReport:
    """Fold the older turns, oldest first, one summary call at a time, until the run is within `target`, the
    older turns are all folded, or `calls` allows no more."""
    stage: Stage = "extract_old_histories"
    older = [run.messages[index] for exchange in run.older() for index in exchange]
    if not older:
        return StageReport(stage, "unchanged", run.total, "no older turns before the latest user message")
    # Rendered once, whole: a tool result is named after its call even when the call was folded earlier.
    texts = dict(zip(map(id, older), chat.transcript(older, summarizer.settings.summary_chunk_chars), strict=True))
    taken: set[int] = set()
    removed = sent = 0
    stopped = detail = ""
    while run.total > target:
        exchanges = run.older()
        waiting = [index for exchange in exchanges for index in exchange if id(run.messages[index]) not in taken]
        if not waiting:
            break
        if stopped := calls.refusal():
            detail = STOPPED[stopped].format(limit=calls.limit)
            break
        turns = [_turn(run.messages[index], texts[id(run.messages[index])]) for index in waiting]
        try:
            folded = calls.fold(summarizer, session_id, turns)
        except NotFound:
            return StageReport(stage, "skipped", run.total, f"session {session_id!r} has no stored messages, so no "
                               "rolling summary to fold the older turns into; they are kept", "SESSION_NOT_FOUND")
        except MemsvcError as error:
            if not removed:
                return failed(stage, run, error, "the older turns are")
            stopped, detail = error.reason, error.message
            break
        newly = {id(run.messages[waiting[number]]) for number in folded.covered}
        sent += folded.count
        if not newly - taken and not folded.count:
            break  # nothing folded and no call made: nothing more will come of another
        taken |= newly
        gone = [index for exchange in exchanges if all(id(run.messages[i]) in taken for i in exchange)
                for index in exchange]
        if folded.summary is not None and gone:
            removed += run.replace(gone)
            run.set_turn_context(rolling.turn_context(folded.summary))
    if not removed:
        if stopped:
            return StageReport(stage, "skipped", run.total, f"no older turn folded: {detail}", stopped)
        return StageReport(stage, "unchanged", run.total, f"the summary took in {sent} messages but no whole older "
                           "exchange, so every older turn is kept")
    how = f"{calls.made} summary call{'s' * (calls.made != 1)} over {sent} messages" if sent else \
        "no call: already summarized"
    report = f"{removed} older messages now live in the rolling summary ({how}); the turn context carries it"
    if stopped:
        kept = sum(len(exchange) for exchange in run.older())
        report += f"; stopped with {kept} older messages kept: {detail}"
    return StageReport(stage, "compacted", run.total, report, stopped, messages_removed=removed)


def _turn(message: chat.ChatMessage, text: str) -> Turn:
    """A plain user or assistant message as the session stores it; a tool call or result as its text."""
    if message.role in ("user", "assistant") and not message.calls:
        return Turn(message.role, message.text)
    return Turn("tool" if message.is_result else message.role, text)


@tracing.traced("fit.tool_history")
def tool_history(run: Run, model: llm.Model, target: int, language: str, chunk_chars: int) -> StageReport:
    stage: Stage = "tool_history"
    exchanges = run.tail()
    span = _oldest_enough(run, exchanges, target)
    messages = [run.messages[index] for exchange in span for index in exchange]
    if not any(message.calls for message in messages):
        return StageReport(stage, "unchanged", run.total, "no tool-call exchange to summarize")
    latest = run.latest_user
    request = run.messages[latest].text if latest >= 0 else ""
    allowance = _allowance(target)
    system = llm.fill(llm.prompt(TOOL_HISTORY_PROMPT), request=llm.shortened(request, REQUEST_CHARS),
                      words=str(allowance * 3 // 4), language=language)
    lines = chat.transcript(messages, max(LINE_CHARS, chunk_chars // len(messages)))
    try:
        reply = model.complete(system, "\n".join(lines))
        if not reply:
            raise SummaryReplyInvalid("the summary model's reply was empty", reason=Reason.LLM_REPLY_EMPTY)
    except MemsvcError as error:
        return failed(stage, run, error, "the tool calls are")
    summary = chat.new("user", f"{chat.TOOL_HISTORY_HEADER}\n{reply}")
    if run.counter.message(summary) >= run.cost(span):
        return StageReport(stage, "unchanged", run.total, "the summary came out no shorter than the calls it "
                           "would replace; they are kept")
    calls = sum(len(message.calls) for message in messages)
    removed = run.replace([index for exchange in span for index in exchange], summary)
    return StageReport(stage, "compacted", run.total, f"{calls} tool calls in {removed} messages summarized into "
                       "one message", messages_removed=removed)


def _allowance(target: int) -> int:
    return min(MAX_SUMMARY_TOKENS, max(MIN_SUMMARY_TOKENS, target // 8))


def _oldest_enough(run: Run, exchanges: list[Exchange], target: int) -> list[Exchange]:
    """The fewest oldest exchanges whose place, taken by a summary, brings the run within `target`; else all."""
    allowance = _allowance(target)
    removed = 0
    for count, exchange in enumerate(exchanges, start=1):
        removed += run.cost([exchange])
        if run.total - removed + allowance <= target:
            return exchanges[:count]
    return exchanges


@tracing.traced("fit.trim_fallback")
def trim_fallback(run: Run, target: int) -> StageReport:
    stage: Stage = "trim_fallback"
    exchanges = run.older() + run.tail()
    removed, dropping = 0, []
    for exchange in exchanges:
        if run.total - removed <= target:
            break
        dropping.append(exchange)
        removed += run.cost([exchange])
    if not dropping:
        return StageReport(stage, "unchanged", run.total, "nothing left to drop: only the system messages, the "
                           "latest user message and the turn context remain")
    gone = run.replace([index for exchange in dropping for index in exchange])
    return StageReport(stage, "compacted", run.total, f"the {len(dropping)} oldest exchanges ({gone} messages) "
                       "were dropped", messages_removed=gone)


@tracing.traced("fit.raw_tool_fallback")
def raw_tool_fallback(run: Run, previous_model: str) -> StageReport:
    stage: Stage = "raw_tool_fallback"
    changed = run.render(chat.plain)
    if not changed:
        return StageReport(stage, "unchanged", run.total, "no tool calls or results to rewrite")
    return StageReport(stage, "compacted", run.total, f"{changed} tool-call and tool-result messages rewritten as "
                       f"plain text: they came from {previous_model}")
