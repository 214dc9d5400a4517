"""What a PostgreSQL failure means to a caller of error memory.

Owns the mapping of psycopg errors (a server down or restarting, a login
refused, a full disk...) to domain errors with stable reasons, so an outage
is never INTERNAL: UNAVAILABLE when waiting may help, FAILED_PRECONDITION
when a person must fix a setting or the database, RESOURCE_EXHAUSTED when
the database is out of room. Must never put a password or lesson text in a
message (libpq's and the server's messages carry neither).
"""

from __future__ import annotations

import re

import psycopg

from memsvc.core.errors import FailedPrecondition, MemsvcError, ResourceExhausted, Unavailable
from memsvc.core.reasons import Reason

# A refused connection carries no SQLSTATE (libpq keeps only the server's text), so these
# read the text; a server speaking another language falls through to UNAVAILABLE.
_LOGIN_REFUSED = re.compile(r"authentication failed|no pg_hba\.conf entry|role \".*\" does not exist|"
                            r"password is required|no password supplied|certificate", re.IGNORECASE)
_NO_DATABASE = re.compile(r"database \".*\" does not exist", re.IGNORECASE)
_NO_SLOTS = re.compile(r"too many clients|remaining connection slots", re.IGNORECASE)
_RETRYABLE_CLASSES = ("08", "25", "40", "55", "57")
"Connection lost, read-only (a standby during failover), rolled back, lock or statement timeout, shutting down."


def cause(exc: psycopg.Error) -> str:
    """The database's own words for `exc`, one line, for logs and start-up errors."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.removeprefix("connection failed: ")[:300]


def database_error(exc: psycopg.Error, what: str) -> MemsvcError | None:
    """The domain error for `exc`, met while `what`; None for a bug of ours (bad SQL, bad
    data), which stays INTERNAL."""
    state = exc.sqlstate or ""
    text = "" if state else str(exc)
    if state == "53100":
        return ResourceExhausted(f"the lesson database's disk is full while {what}; nothing was stored, "
                                 "free space on the database server and retry", reason=Reason.DISK_FULL)
    if state.startswith("53") or _NO_SLOTS.search(text):
        return ResourceExhausted(f"the lesson database is out of memory or connections while {what}; "
                                 "retry with backoff, or lower lessons_pool_size",
                                 reason=Reason.LESSONS_DATABASE_EXHAUSTED)
    if state.startswith("28") or _LOGIN_REFUSED.search(text):
        return FailedPrecondition("the lesson database refused memsvc's login: check the user in lessons_dsn "
                                  "and the password in lessons_password_file or MEMSVC_LESSONS_PASSWORD",
                                  reason=Reason.LESSONS_DATABASE_AUTH_FAILED)
    if state == "3D000" or _NO_DATABASE.search(text):
        return FailedPrecondition("the database named in lessons_dsn does not exist: create it (memsvc creates "
                                  "its tables itself)", reason=Reason.LESSONS_DATABASE_NOT_FOUND)
    if state == "42501":
        return FailedPrecondition(f"the lesson database's user may not do this while {what}: it needs to own "
                                  "memsvc's tables, and to create them the first time",
                                  reason=Reason.LESSONS_DATABASE_PERMISSION_DENIED)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or state[:2] in _RETRYABLE_CLASSES:
        return Unavailable(f"error memory's database cannot be reached or is busy while {what}; retry later",
                           reason=Reason.LESSONS_DATABASE_UNAVAILABLE)
    return None
