"""Shared benchmark plumbing: a real server process and percentile maths."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import ServerProcess

RESULTS = Path(__file__).resolve().parent / "results"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": statistics.median(ordered) * 1e3,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
            "n": len(ordered)}


def interleaved(calls: dict[str, Callable[[], object]], rounds: int, warmup: int = 200,
                rotate: bool = False) -> dict[str, dict]:
    """Time each call once per round, round-robin, so noise hits all alike; with `rotate`, each
    round starts one call further on, so no call always follows the same one."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls.items())
    for round_number in range(rounds):
        shift = round_number % len(order) if rotate else 0
        for name, call in order[shift:] + order[:shift]:
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: percentiles(values) for name, values in samples.items()}


def save(name: str, result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")


__all__ = ["ServerProcess", "interleaved", "percentiles", "save"]
