"""FitService: translates FitContext to the fitter, and its reply back.

Holds FitService's own proto <-> domain mappings (they concern no other
service). Must never decide anything about a run: memsvc/fit does.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from memsvc.app import App
from memsvc.core.errors import PermissionDenied
from memsvc.core.reasons import Reason
from memsvc.fit.fitter import FitRequest, Fitted
from memsvc.fit.stages import StageReport
from memsvc.rpc.access import FIT_WITH_SESSION, caller_of, serving
from memsvc.rpc.status import translated
from memsvc_client.v1 import fit_pb2 as pb
from memsvc_client.v1 import fit_pb2_grpc

WINDOW_SOURCES = {"shipped": pb.WINDOW_SOURCE_SHIPPED, "fetched": pb.WINDOW_SOURCE_FETCHED,
                  "endpoint": pb.WINDOW_SOURCE_ENDPOINT, "fallback": pb.WINDOW_SOURCE_FALLBACK,
                  "request": pb.WINDOW_SOURCE_REQUEST}
STAGES = {"check_threshold": pb.FIT_STAGE_CHECK_THRESHOLD, "extract_old_histories": pb.FIT_STAGE_EXTRACT_OLD_HISTORIES,
          "tool_history": pb.FIT_STAGE_TOOL_HISTORY, "trim_fallback": pb.FIT_STAGE_TRIM_FALLBACK,
          "raw_tool_fallback": pb.FIT_STAGE_RAW_TOOL_FALLBACK}
OUTCOMES = {"compacted": pb.FIT_OUTCOME_COMPACTED, "unchanged": pb.FIT_OUTCOME_UNCHANGED,
            "skipped": pb.FIT_OUTCOME_SKIPPED, "failed": pb.FIT_OUTCOME_FAILED}


class FitServicer(fit_pb2_grpc.FitServiceServicer):
    def __init__(self, app: App):
        self.app = app

    @translated
    async def FitContext(self, request: pb.FitContextRequest,
                         context: grpc.aio.ServicerContext) -> pb.FitContextResponse:
        if request.session_id and not caller_of().may(FIT_WITH_SESSION):  # it folds into the session's summary
            raise PermissionDenied(f"FitContext with a session_id needs the {FIT_WITH_SESSION} role (it folds the "
                                   "run into the session's summary); without one, read is enough",
                                   reason=Reason.ROLE_FORBIDS, metadata={"needed": FIT_WITH_SESSION})
        fitter = serving(self.app).fitter
        remaining = context.time_remaining()
        fit = _request(request, None if remaining is None else time.monotonic() + remaining)
        # A fitting run costs one count, done here; a big run, a tokenizer to load and model calls go to a thread.
        begun = await asyncio.to_thread(fitter.begin, fit) if fitter.may_wait(fit) else fitter.begin(fit)
        fitted = await asyncio.to_thread(fitter.fit, begun) if begun.needs_stages else fitter.fit(begun)
        return _reply(fitted)


def _request(request: pb.FitContextRequest, deadline: float | None) -> FitRequest:
    return FitRequest(session_id=request.session_id, vendor=request.vendor, model=request.model,
                      messages=list(request.messages), overflow=request.overflow,
                      previous_model=request.previous_model, context_window=request.context_window,
                      reserved_tokens=request.reserved_tokens, deadline=deadline)


def _reply(fitted: Fitted) -> pb.FitContextResponse:
    return pb.FitContextResponse(
        messages=fitted.messages, context_window=fitted.window.tokens,
        window_source=WINDOW_SOURCES[fitted.window.source], window_entry=fitted.window.entry,
        budget_tokens=fitted.budget, target_tokens=fitted.target, tokens_before=fitted.before,
        tokens_after=fitted.after,
        counting=pb.TOKEN_COUNTING_EXACT if fitted.exact else pb.TOKEN_COUNTING_ESTIMATE,
        tokenizer=fitted.tokenizer, stages=[_stage(report) for report in fitted.stages], fits=fitted.fits,
        changed=fitted.changed, unfit_reason=fitted.unfit_reason, messages_omitted=fitted.messages_omitted)


def _stage(report: StageReport) -> pb.FitStageReport:
    return pb.FitStageReport(stage=STAGES[report.stage], outcome=OUTCOMES[report.outcome], reason=report.reason,
                             detail=report.detail, messages_removed=report.messages_removed,
                             tokens_after=report.tokens_after)
