"""The server's own metrics over the last hour, kept in memory for the dashboard's plots.

Owns a fixed-size ring per series: one value every `STEP_SECONDS` for the
last `SLOTS` steps (an hour), sampled by a job whether or not anyone watches,
for each tracked tenant and for all tenants together (`ALL`). Calls arrive
through runtime/metrics.py's `call_finished` (the same observation feeds the
Prometheus histogram): per step, each kind's rate and its p50/p99 from
counts in `metrics.LATENCY_BUCKETS`. Gauges (sessions, embedding backlog,
stored bytes per tier) come from the readings the assembly hands `sample`.

The bound, whatever the traffic: at most `MAX_TENANTS` tenants are tracked
by name (later ones share the `OTHER` series), so at most `MAX_KEYS` keys
each hold `len(SERIES)` rings of `SLOTS` doubles: `BOUND_BYTES` (2,056,320 bytes,
about 2 MB) of values, plus one step's counters per key and kind. Calls of kinds not
in `KINDS` are not kept. Must never hold a session id or any text of a
conversation, nor grow with the number of calls, sessions or tenants.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from array import array
from collections.abc import Callable, Mapping

import msgspec

from memsvc.runtime.metrics import LATENCY_BUCKETS

STEP_SECONDS = 10.0
SLOTS = 360
"One hour of steps."
KINDS = ("append", "search_semantic", "search_keyword", "search_hybrid", "lookup_errors")
"The calls plotted; an RPC of another kind is not kept here (Prometheus has every one)."
GAUGES = ("sessions", "embedding_backlog", "bytes_window", "bytes_vectors", "bytes_archive")
"Read from the domain at each step."
SERIES = (*(f"{kind}_{what}" for kind in KINDS for what in ("per_second", "p50_ms", "p99_ms")),
          "error_memory_hits", *GAUGES)
MAX_TENANTS = 32
ALL = "*"
"The key of every tenant's calls and gauges together."
OTHER = "(other)"
"The key of the tenants past MAX_TENANTS."
MAX_KEYS = MAX_TENANTS + 2
BOUND_BYTES = MAX_KEYS * len(SERIES) * SLOTS * array("d").itemsize
"What the rings hold at most, in bytes."

Readings = Mapping[str, Mapping[str, float]]
"tenant -> gauge name -> value, at one step."


class Plot(msgspec.Struct, frozen=True):
    """What the dashboard draws for one key: a time axis (Unix seconds, oldest first) and a value per time
    per series (None where the server was not sampling or had nothing to measure)."""

    key: str
    step_seconds: float
    times: list[float]
    series: dict[str, list[float | None]]
    tracked: bool
    "False for a tenant past MAX_TENANTS: its calls count in OTHER and in ALL, not under its name."


class _Step:
    """One key's calls during the current step: per kind, a count per latency bucket (and past the last)."""

    __slots__ = ("buckets", "hits")

    def __init__(self) -> None:
        self.buckets = {kind: [0] * (len(LATENCY_BUCKETS) + 1) for kind in KINDS}
        self.hits = 0


def _quantile(counts: list[int], q: float) -> float | None:
    """The q-quantile of a step's calls in milliseconds, interpolated within its bucket as Prometheus's
    histogram_quantile does; None without calls."""
    total = sum(counts)
    if not total:
        return None
    rank, seen, lower = q * total, 0, 0.0
    for upper, count in zip((*LATENCY_BUCKETS, math.inf), counts, strict=True):
        if count and seen + count >= rank:
            if upper == math.inf:
                return lower * 1000  # past the last bucket: its lower bound, as Prometheus answers
            return (lower + (upper - lower) * (rank - seen) / count) * 1000
        seen += count
        lower = upper if upper != math.inf else lower
    return lower * 1000


class History:
    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self._stamps = array("d", [math.nan] * SLOTS)
        "The time each slot was written at (NaN: never)."
        self._rings: dict[str, dict[str, array[float]]] = {}
        self._steps: dict[str, _Step] = {ALL: _Step()}
        self._tracked: list[str] = []
        self._last_sample = clock()
        self._next_slot = 0

    def _key(self, tenant: str) -> str:
        """The key a tenant's numbers go under; the caller holds the lock."""
        if tenant in self._tracked:
            return tenant
        if len(self._tracked) < MAX_TENANTS:
            self._tracked.append(tenant)
            return tenant
        return OTHER

    def record(self, kind: str, tenant: str, seconds: float, hits: int = 0) -> None:
        """One finished call of `kind` for `tenant` that took `seconds` (and found `hits` lessons)."""
        if kind not in KINDS:
            return
        bucket = bisect.bisect_left(LATENCY_BUCKETS, seconds)  # the first bucket whose upper bound holds it
        with self._lock:
            for key in (ALL, self._key(tenant)):
                step = self._steps.get(key)
                if step is None:
                    step = self._steps[key] = _Step()
                step.buckets[kind][bucket] += 1
                step.hits += hits

    def sample(self, readings: Readings) -> None:
        """Close the current step: write every series of every key into the next slot (a job calls this every
        STEP_SECONDS)."""
        now = self._clock()
        with self._lock:
            elapsed = max(now - self._last_sample, 1e-9)
            self._last_sample = now
            steps, self._steps = self._steps, {ALL: _Step()}
            gauges: dict[str, dict[str, float]] = {}
            for tenant, values in readings.items():
                for key in (ALL, self._key(tenant)):
                    summed = gauges.setdefault(key, dict.fromkeys(GAUGES, 0.0))
                    for name in GAUGES:
                        summed[name] += float(values.get(name, 0.0))
            slot = self._next_slot
            self._next_slot = (slot + 1) % SLOTS
            self._stamps[slot] = now
            for key in {*self._rings, *steps, *gauges}:
                rings = self._rings.get(key)
                if rings is None:
                    rings = self._rings[key] = {name: array("d", [math.nan] * SLOTS) for name in SERIES}
                values = _step_values(steps.get(key), elapsed)
                values.update(gauges.get(key, {}))
                for name, ring in rings.items():
                    ring[slot] = values.get(name, math.nan)

    def plot(self, tenant: str) -> Plot:
        """The last hour of `tenant` (ALL: every tenant together), oldest first."""
        with self._lock:
            tracked = tenant in (ALL, OTHER) or tenant in self._tracked or len(self._tracked) < MAX_TENANTS
            order = sorted((stamp, slot) for slot, stamp in enumerate(self._stamps) if not math.isnan(stamp))
            rings = self._rings.get(tenant, {}) if tracked else {}
            series = {name: [_present(rings[name][slot]) if name in rings else None for _, slot in order]
                      for name in SERIES}
            return Plot(tenant, STEP_SECONDS, [stamp for stamp, _ in order], series, tracked)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._rings)

    def values_held(self) -> int:
        """How many values the rings hold now: at most BOUND_BYTES / 8."""
        with self._lock:
            return sum(len(ring) for rings in self._rings.values() for ring in rings.values())


def _step_values(step: _Step | None, elapsed: float) -> dict[str, float]:
    if step is None:
        return {}
    values: dict[str, float] = {"error_memory_hits": float(step.hits)}
    for kind, counts in step.buckets.items():
        values[f"{kind}_per_second"] = sum(counts) / elapsed
        for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
            quantile = _quantile(counts, q)
            if quantile is not None:
                values[f"{kind}_{name}"] = quantile
    return values


def _present(value: float) -> float | None:
    return None if math.isnan(value) else value

