"""Keeping a search's reply within max_reply_bytes: the lowest-ranked hits are left out, and counted.

Owns what a unit of hits is (a run of matches and their context, ranked by
its best match; a keyword hit without context, ranked by its place) and the
rule that every hit kept ranks above every hit left out. Must never search
or reorder what it keeps.
"""

from __future__ import annotations

import msgspec

from memsvc.core import replies
from memsvc.search.query import Hit, Results


def within(results: Results, reply_bytes: int, omit_payloads: bool) -> Results:
    """`results` with payloads left out when asked, and the lowest-ranked hits that do not fit
    `reply_bytes` left out (counted in `omitted`); MESSAGE_TOO_LARGE_FOR_REPLY when not even the best
    match fits alone."""
    hits = results.hits
    if omit_payloads:
        hits = [msgspec.structs.replace(hit, record=record)
                for hit, record in zip(hits, replies.without_payloads([hit.record for hit in hits]), strict=True)]
    if replies.surely_fits([hit.record for hit in hits], reply_bytes):
        return Results(hits, results.unsearched)  # all kept: runs stay numbered as expansion numbered them
    kept: set[int] = set()
    used = 0
    for unit in _ranked_units(hits):
        size = sum(replies.cost(hits[index].record) for index in unit)
        if used + size > reply_bytes:
            if not kept:  # the best run alone is too large: its best match alone, or the caller hears why
                best = unit[0]
                if replies.cost(hits[best].record) > reply_bytes:
                    raise replies.too_large(hits[best].record, reply_bytes)
                kept.add(best)
            break
        kept.update(unit)
        used += size
    shown = [hit for index, hit in enumerate(hits) if index in kept]
    return Results(_renumbered(shown), results.unsearched, omitted=len(hits) - len(shown))


def _ranked_units(hits: list[Hit]) -> list[list[int]]:
    """Indexes of `hits` in units, best first; each run's best match first within it."""
    runs: dict[int, list[int]] = {}
    singles: list[list[int]] = []
    for index, hit in enumerate(hits):
        if hit.run:
            runs.setdefault(hit.run, []).append(index)
        else:
            singles.append([index])  # keyword without context: already best first
    ranked = []
    for members in runs.values():
        members.sort(key=lambda index: (hits[index].is_context, -hits[index].score))
        ranked.append(members)
    ranked.sort(key=lambda members: -hits[members[0]].score)  # stable: ties keep time order
    return singles + ranked


def _renumbered(hits: list[Hit]) -> list[Hit]:
    """Runs numbered from 1 in time order again, after whole runs were left out."""
    numbers = {run: place for place, run in enumerate(sorted({hit.run for hit in hits if hit.run}), start=1)}
    return [msgspec.structs.replace(hit, run=numbers[hit.run]) if hit.run else hit for hit in hits]
