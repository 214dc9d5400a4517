"""CheckThreshold: the token budget of one model call.

Owns the rule: the budget is fit_threshold (80% by default) of the model's
context window, less the tokens the caller reserves; the window comes from
the request when it names one, else from the model table. With overflow the
provider has just refused a call of this size, so the target is lower
still: the same share of what was sent. Must never count tokens or change
messages.
"""

from __future__ import annotations

import math

import msgspec

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.fit.table import Window


class Budget(msgspec.Struct, frozen=True):
    window: Window
    tokens: int
    "fit_threshold of the window, less the reserved tokens."

    def target(self, sent: int, overflow: bool, threshold: float) -> int:
        """What the stages aim for: the budget, or with overflow at most `threshold` of what was sent."""
        return min(self.tokens, math.floor(sent * threshold)) if overflow else self.tokens


def check_threshold(window: Window, threshold: float, reserved: int) -> Budget:
    tokens = math.floor(window.tokens * threshold) - reserved
    if tokens <= 0:
        raise InvalidArgument(
            f"reserved_tokens {reserved} leaves no budget: the window of {window.entry or 'the model'} is "
            f"{window.tokens} tokens and FitContext fills at most {threshold:.0%} of it", reason=Reason.NO_BUDGET)
    return Budget(window, tokens)
