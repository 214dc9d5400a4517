"""The tools an MCP agent gets, with the descriptions its model reads.

Owns each tool's name, parameters, description and result shape: `chat_history` (search the
conversation, read the context window and the rolling summary), `lookup_error_lessons` and
`record_error_lesson` (error memory). Every tool is one or two calls through the asyncio
client; a refused call becomes a tool error carrying the server's status and reason, and a
session outside the server's scope is refused before any call (access.py). Must never reach
the data directory or hold memory logic.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, ParamSpec

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memsvc.mcp.access import Scope
from memsvc_client import MemsvcError

P = ParamSpec("P")

CHAT_HISTORY = """Look back at this conversation beyond what you can see. Three modes:

- mode="search" (the default): find earlier messages. Give `query`. `match` picks how:
  "hybrid" (default) fuses both of the others and finds more than either, each hit with the 2
  messages before it and 1 after (`is_context` marks those neighbours) so you see the exchange;
  "semantic" finds messages by meaning among the recent ones; "keyword" finds exact words over
  the whole history, archived messages included (every word of the query must occur; best
  first). Narrow with `time_range` ("day", "week", "month", "year") and `limit` (default 8, at
  most 32). Use it for "what did we decide
  about X?", "find where the user mentioned Y".
- mode="context": the recent window of messages and the rolling summary of older ones
  (standing rules to follow in `key_decisions`, earlier topics in `past_discussions`).
  `omitted_older_messages` > 0: the window was too large to send whole; its oldest messages
  were left out (find them with mode="search").
- mode="summary": only the rolling summary.

Times are UTC ISO 8601. An empty `hits` list means nothing matched: say so rather than guess.
`omitted_lower_ranked_hits` > 0: more matched than one reply holds; narrow the query or the range."""

LOOKUP = """Before retrying a tool call that failed, look up lessons from earlier failures of the
same tool, from any session: what the failure looked like, why, and what fixed it. Give the
tool's name and the error text you got. `related_errors` is ready to read: apply a recorded fix
only if it fits this failure. Returns nothing when no lesson is related."""

RECORD = """After a tool failure is fixed, record the lesson so any later session can reuse the fix:
the tool's name, the `symptom` (the error text), the `action` that fixed it, and if you know it
the `cause`; `keywords` help later lookups. Record only what worked (outcome "resolved"); a
"failed" or "abandoned" attempt is accepted and discarded, so it is never suggested. Recording
the same tool and symptom again refreshes the existing lesson instead of adding one."""

Mode = Literal["search", "context", "summary"]
Match = Literal["semantic", "keyword", "hybrid"]
TimeRange = Literal["all", "day", "week", "month", "year"]
Outcome = Literal["resolved", "failed", "abandoned"]


def iso(unix_nano: int) -> str | None:
    if not unix_nano:
        return None
    return datetime.fromtimestamp(unix_nano / 1e9, tz=UTC).isoformat(timespec="seconds")


def message(item: Any) -> dict[str, Any]:
    return {"id": item.id, "role": item.role, "sender": item.sender or None, "sent_at": iso(item.send_at_unix_nano),
            "content": item.content}


def summary(item: Any) -> dict[str, Any] | None:
    if item is None:
        return None
    current = item.current_discussion
    return {"key_decisions": item.key_decisions,
            "past_discussions": [{"topic": p.topic, "description": p.description, "direction": p.direction,
                                  "last_discussed": p.last_discussed} for p in item.past_discussions],
            "current_discussion": None if current is None else {
                "topic": current.topic, "description": current.description, "perspectives": current.perspectives,
                "direction": current.direction}}


def lesson(record: Any) -> dict[str, Any]:
    return {"id": record.id, "tool_name": record.tool_name, "symptom": record.symptom, "cause": record.cause,
            "action": record.action, "keywords": record.keywords, "hit_count": record.hit_count,
            "expires_at": iso(record.expires_at_unix_nano)}


def refusals(tool: Callable[P, Awaitable[dict[str, Any]]]) -> Callable[P, Awaitable[dict[str, Any]]]:
    """A refused call as a tool error the model can read: the status, the stable reason, the message."""
    @functools.wraps(tool)
    async def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        try:
            return await tool(*args, **kwargs)
        except (MemsvcError, ValueError) as error:
            raise ToolError(str(error)) from error
    return run


class Tools:
    """The tools, over one asyncio client, touching only the sessions of `scope`."""

    def __init__(self, memory: Any, scope: Scope):
        self.memory, self.scope = memory, scope

    @refusals
    async def chat_history(
        self,
        mode: Annotated[Mode, Field(description="search: find messages; context: window + summary; "
                                                "summary: the rolling summary")] = "search",
        query: Annotated[str, Field(description="mode=search: what to find")] = "",
        match: Annotated[Match, Field(description="hybrid (both fused, the best), semantic (meaning) or "
                                                  "keyword (exact words, whole history)")] = "hybrid",
        time_range: Annotated[TimeRange, Field(description="only messages from the last day/week/month/year")]
        = "all",
        limit: Annotated[int, Field(ge=1, le=32, description="most hits (before neighbours are added)")] = 8,
        session_id: Annotated[str, Field(description="the conversation; empty for this agent's own (other "
                                                     "sessions only as this server allows)")] = "",
    ) -> dict[str, Any]:
        session = self.scope.session(session_id)
        if mode == "context":
            context = await self.memory.get_context(session, omit_payloads=True)  # the agent reads content only
            return {"window": [message(m) for m in context.window], "summary": summary(context.summary),
                    "omitted_older_messages": context.omitted_messages}
        if mode == "summary":
            stored = await self.memory.get_summary(session)
            return {"summary": summary(stored.summary), "summarized_until": iso(stored.cursor_unix_nano)}
        if not query.strip():
            raise ValueError('mode="search" needs a query')
        reply = await self.memory.search(session, query, match=match, time_range=time_range, limit=limit,
                                         omit_payloads=True)
        return {"hits": [{**message(hit.message), "source": hit.source, "score": round(hit.score, 4),
                          "is_context": hit.is_context, "run": hit.run} for hit in reply.hits],
                "unsearched": reply.unsearched, "omitted_lower_ranked_hits": reply.omitted_hits}

    @refusals
    async def lookup_error_lessons(
        self,
        tool_name: Annotated[str, Field(description="the tool whose call failed")],
        error_text: Annotated[str, Field(description="the error text the tool returned")],
        limit: Annotated[int, Field(ge=1, le=32, description="most lessons")] = 3,
    ) -> dict[str, Any]:
        found = await self.memory.lookup_errors(tool_name, error_text, limit=limit)
        return {"related_errors": found.related_errors, "lessons": [lesson(r) for r in found.records]}

    @refusals
    async def record_error_lesson(
        self,
        tool_name: Annotated[str, Field(description="the tool whose call failed")],
        symptom: Annotated[str, Field(description="what the failure looked like: the error text")],
        action: Annotated[str, Field(description="what fixed it")],
        cause: Annotated[str, Field(description="why it failed, if known")] = "",
        keywords: Annotated[list[str] | None, Field(description="extra words for later lookups")] = None,
        outcome: Annotated[Outcome, Field(description="resolved: the action fixed it")] = "resolved",
        session_id: Annotated[str, Field(description="the session recording it; empty for this agent's")] = "",
    ) -> dict[str, Any]:
        recorder = self.scope.session(session_id) if session_id else self.scope.own
        reply = await self.memory.record_error(tool_name, symptom, action, outcome=outcome, cause=cause,
                                               keywords=keywords or [], session_id=recorder)
        return {"stored": reply.stored, "refreshed": reply.refreshed, "detail": reply.detail or None,
                "lesson": lesson(reply.record) if reply.record else None}
