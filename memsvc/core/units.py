"""Units of time, the named time ranges of search, and the open upper bound.

Every time memsvc stores is UTC Unix nanoseconds. Must never read a clock.
"""

from __future__ import annotations

NANOS_PER_SECOND = 1_000_000_000
NANOS_PER_DAY = 86_400 * NANOS_PER_SECOND
NO_UPPER_BOUND = 2**63 - 1
"The largest signed 64-bit value: an open upper bound for times and ids (Tantivy's i64 and u64 alike)."
TIME_RANGES = {"all": 0, "1d": NANOS_PER_DAY, "7d": 7 * NANOS_PER_DAY, "1m": 30 * NANOS_PER_DAY,
               "1y": 365 * NANOS_PER_DAY}
"A search's named time range -> how far back it reaches (0: no limit)."


def seconds_to_nanos(seconds: float) -> int:
    return int(seconds * NANOS_PER_SECOND)
