"""The audit log: one JSON line for each destructive or administrative call, whoever made it.

Owns which calls are audited (Reset, RemoveSession, DeleteMessages,
ReplaceMessages, lesson edits and deletes, holds and releases, pauses,
imports and exports) and what a line says: the call, the tenant it acted
for, the token's label and role, the session, and the outcome (a status
code's name). Lines go to the `memsvc.audit` logger, event "audit", among
the server's JSON logs. Must never write a token, a message or a lesson's
text.
"""

from __future__ import annotations

import logging

from memsvc.tenancy.tenants import Caller

log = logging.getLogger("memsvc.audit")

AUDITED = frozenset({"Reset", "RemoveSession", "DeleteMessages", "ReplaceMessages", "UpdateErrorAction", "DeleteError",
                     "HoldSession", "ReleaseSession", "PauseSessionCreation", "ImportSession", "ExportSession"})


def record(method: str, caller: Caller | None, tenant: str, outcome: str, *messages: object) -> None:
    """One audited call's line (nothing for a call that is not audited: every call comes here, so nothing
    is read from it before that is known); `caller` None: a token the server does not know (or none),
    whose tenant and label are not known either. The session is the first that `messages` name: an
    import's reply names the session its request stream did not."""
    if method in AUDITED:
        session = next(filter(None, map(_session_of, messages)), "")
        log.info("audit", extra={"rpc": method, "tenant": tenant, "token": caller.label if caller else "",
                                 "role": caller.role if caller else "", "session": session, "outcome": outcome})


def _session_of(message: object) -> str:
    return str(getattr(message, "session_id", ""))
