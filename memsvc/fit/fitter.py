"""FitContext: an agent run's messages fitted to its model's window before a call.

Owns which stages run and in what order: CheckThreshold always; while the
run is over its target, ExtractOldHistories (as many summary calls as it
takes, within fit_max_summary_calls and the caller's deadline) and then
ToolHistory (each skipped, and said so, without an LLM); with overflow,
TrimFallback when they could not compact enough; RawToolFallback last when
the run switched models; and, for a run still over its target, the one
reason why. Also what is refused: a request that is not a run
(INVALID_ARGUMENT), a run whose kept messages alone exceed the budget, and
an overflow with nothing left to compact (both FAILED_PRECONDITION
CONTEXT_TOO_LARGE, naming the sizes). The count a fitting run costs is split
from the stages, which may call a model, so that the caller can run those on
a thread. Must never store the run's messages: only the rolling summary may
change.
"""

from __future__ import annotations

import logging

import msgspec

from memsvc.core.config import Settings
from memsvc.core.errors import FailedPrecondition, InvalidArgument
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.replies import MESSAGE_OVERHEAD
from memsvc.fit import chat, stages, tokens
from memsvc.fit.budget import Budget, check_threshold
from memsvc.fit.refresh import ModelTable
from memsvc.fit.run import Run
from memsvc.fit.stages import StageReport
from memsvc.fit.table import Window
from memsvc.runtime import tracing
from memsvc.summary import llm
from memsvc.summary.summarizer import Summarizer, language_rule

log = logging.getLogger(__name__)

INLINE_BYTES = 256 * 1024
"A run larger than this is decoded and counted on a thread (a few milliseconds of CPU)."


class FitRequest(msgspec.Struct, kw_only=True):
    session_id: str
    model: str
    messages: list[str]
    "Each one JSON object in the chat-completions shape."
    vendor: str = ""
    overflow: bool = False
    previous_model: str = ""
    context_window: int = 0
    "0: the model table's."
    reserved_tokens: int = 0
    deadline: float | None = None
    "time.monotonic() by which the caller needs the answer; None: no deadline."

    @property
    def switched(self) -> bool:
        previous = self.previous_model.strip().lower()
        return bool(previous) and previous != self.model.strip().lower()


class Fitted(msgspec.Struct):
    messages: list[str]
    window: Window
    budget: int
    target: int
    before: int
    after: int
    exact: bool
    tokenizer: str
    stages: list[StageReport]
    fits: bool
    changed: bool
    unfit_reason: str
    "Empty when the run fits; else the stable reason it does not (the first a stage gave, or NOTHING_LEFT_TO_COMPACT)."
    messages_omitted: bool = False
    "True when `messages` is empty: the run is unchanged and larger than max_reply_bytes (the caller has it)."


class Pass(msgspec.Struct):
    """One FitContext call, counted, before its stages."""

    request: FitRequest
    run: Run
    budget: Budget
    target: int
    before: int
    stages: list[StageReport]

    @property
    def needs_stages(self) -> bool:
        """True when `Fitter.fit` has work beyond the count (a model call, rewritten messages): run it on a thread."""
        return self.request.overflow or self.request.switched or self.run.total > self.target


class Fitter:
    def __init__(self, settings: Settings, table: ModelTable, summarizer: Summarizer, model: llm.Model | None):
        self.settings = settings
        self.table = table
        self.summarizer = summarizer
        self.model = model

    def may_wait(self, request: FitRequest) -> bool:
        """True when `begin` may take milliseconds: a big run, or a tokenizer to load first."""
        return not tokens.loaded(request.model) or sum(map(len, request.messages)) > INLINE_BYTES

    @tracing.traced("fit.check_threshold")
    def begin(self, request: FitRequest) -> Pass:
        """Check the request and count the run against its budget (CheckThreshold)."""
        check_session_id(request.session_id)
        if not request.model.strip():
            raise InvalidArgument("model is required: the model about to be called, e.g. gpt-4o",
                                  reason=Reason.MODEL_REQUIRED)
        run = Run(chat.decode(request.messages), tokens.Counter(request.model))
        window = (Window(request.context_window, "request") if request.context_window
                  else self.table.window(request.vendor, request.model))
        budget = check_threshold(window, self.settings.fit_threshold, request.reserved_tokens)
        before = run.total
        target = budget.target(before, request.overflow, self.settings.fit_threshold)
        kept = run.kept_tokens()
        if kept > budget.tokens:
            raise FailedPrecondition(
                f"the messages FitContext never drops (the system messages, the latest user message and the turn "
                f"context) need {kept} tokens, over the budget of {budget.tokens} for {_named(request, window)} "
                f"({self.settings.fit_threshold:.0%} of its {window.tokens}-token window, less "
                f"{request.reserved_tokens} reserved): shorten them or use a model with a larger window",
                reason=Reason.CONTEXT_TOO_LARGE,
                metadata={"kept_tokens": str(kept), "budget_tokens": str(budget.tokens)})
        check = StageReport("check_threshold", "unchanged", before,
                            f"{before} tokens against a target of {target} (budget {budget.tokens}: "
                            f"{self.settings.fit_threshold:.0%} of {window.tokens} for {_named(request, window)})")
        return Pass(request, run, budget, target, before, [check])

    def fit(self, work: Pass) -> Fitted:
        """Run the stages the count calls for; blocks on model calls when `work.needs_stages`."""
        run, target, request = work.run, work.target, work.request
        if run.total > target:
            self._compact(work)
        if request.overflow and run.total > target:
            work.stages.append(stages.trim_fallback(run, target))
        if request.overflow and not any(report.outcome == "compacted" for report in work.stages):
            raise FailedPrecondition(
                f"the provider refused {work.before} tokens for {_named(request, work.budget.window)} and nothing "
                f"is left to compact: only the messages FitContext never drops remain ({run.kept_tokens()} "
                f"tokens); the model's window must be smaller than the {work.budget.window.tokens} tokens assumed: "
                "pass context_window", reason=Reason.CONTEXT_TOO_LARGE,
                metadata={"kept_tokens": str(run.kept_tokens()), "sent_tokens": str(work.before)})
        if request.switched:
            work.stages.append(stages.raw_tool_fallback(run, request.previous_model))
        messages = [message.raw for message in run.messages]
        fits = run.total <= target
        unfit = "" if fits else next((report.reason for report in work.stages if report.reason),
                                     "NOTHING_LEFT_TO_COMPACT")
        fitted = self._within_reply(Fitted(messages, work.budget.window, work.budget.tokens, target, work.before,
                                           run.total, run.counter.exact, run.counter.name, work.stages, fits,
                                           messages != request.messages, unfit))
        if fitted.changed:
            log.info("run fitted", extra={"session_id": request.session_id, "model": request.model,
                                          "tokens_before": fitted.before, "tokens_after": fitted.after,
                                          "stages": [f"{r.stage}:{r.outcome}" for r in fitted.stages[1:]]})
        return fitted

    def _within_reply(self, fitted: Fitted) -> Fitted:
        """`fitted` as a reply within max_reply_bytes may carry it: an unchanged run too large to send back is
        left out (the caller sent it); a changed one is REPLY_TOO_LARGE."""
        size = sum(len(message.encode()) + MESSAGE_OVERHEAD for message in fitted.messages)
        if size <= self.settings.max_reply_bytes:
            return fitted
        if not fitted.changed:
            return msgspec.structs.replace(fitted, messages=[], messages_omitted=True)
        raise FailedPrecondition(
            f"the fitted run takes {size} bytes, more than a reply may carry (max_reply_bytes "
            f"{self.settings.max_reply_bytes}): pass a smaller context_window, or raise max_reply_bytes together "
            "with the client's receive limit", reason=Reason.REPLY_TOO_LARGE,
            metadata={"reply_bytes": str(size), "max_reply_bytes": str(self.settings.max_reply_bytes)})

    def _compact(self, work: Pass) -> None:
        run, target = work.run, work.target
        if self.model is None:
            work.stages.append(stages.skipped_for_no_llm("extract_old_histories", run))
            work.stages.append(stages.skipped_for_no_llm("tool_history", run))
            return
        calls = stages.SummaryCalls(self.settings.fit_max_summary_calls, work.request.deadline)
        work.stages.append(stages.extract_old_histories(run, self.summarizer, work.request.session_id, target, calls))
        if run.total > target:
            work.stages.append(stages.tool_history(run, self.model, target, language_rule(self.settings.reply_lang),
                                                   self.settings.summary_chunk_chars))


def _named(request: FitRequest, window: Window) -> str:
    return window.entry or (f"{request.vendor}/{request.model}" if request.vendor else request.model)
