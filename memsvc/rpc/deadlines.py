"""What the domain is told of a call: how long its caller still waits, and whether it went away.

Owns turning a call's context (grpc.aio's, or the HTTP listener's stand-in,
which has the same two methods) into a `core.deadline.Deadline`: its time
remaining, and a cancel when the call ends, whichever way it ends, so a
worker thread still busy for a caller that left changes nothing more. Must
never decide what a call does.
"""

from __future__ import annotations

from typing import Any

from memsvc.core.deadline import Deadline


def deadline_of(context: Any) -> Deadline:
    """The call's deadline for the domain; cancelled once the call is over (answered, cancelled, timed out)."""
    deadline = Deadline(context.time_remaining())
    context.add_done_callback(lambda _: deadline.cancel())
    return deadline
